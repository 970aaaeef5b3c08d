"""``nbx.nn.functional.embedding``: rows of a table gathered by index, PyTorch's semantics
(https://pytorch.org/docs/stable/generated/torch.nn.functional.embedding.html).

``embedding(input, weight)[..., :] = weight[input[...], :]``: ``input`` int32/int64 of any shape (a 0-dim index
included), ``weight [num_embeddings, embedding_dim]`` of any dtype; the result has shape ``input.shape +
(embedding_dim,)`` and ``weight``'s dtype. ``padding_idx`` only matters for gradients (the forward reads the
padding row like any other; PyTorch checks its range, and so does this). ``max_norm`` renormalises, in place,
every row that ``input`` references whose ``norm_type``-norm exceeds ``max_norm`` (``row *= max_norm /
(norm + 1e-7)``, ATen's ``embedding_renorm_``) before the lookup. ``scale_grad_by_freq`` and ``sparse`` are
gradient options and are ignored.

Indices out of range (negative ones included: embedding does not wrap) raise ``IndexError("index out of range in
self")`` on every device. On the GPU the lookup kernel writes a flag to a device int32 when it meets such an
index (and writes zeros, never another row, for it); the host reads the flag after the launch and raises. That
read synchronises the stream, the price of never returning garbage.

**Kernels**: ``_embedding_kernel`` copies ``BLOCK_T`` rows x ``BLOCK_D`` columns per program (64-bit offsets).
With ``max_norm``: ``_embedding_mark_kernel`` flags the referenced rows (idempotent stores: duplicates are
harmless), ``_embedding_renorm_kernel`` rescales each flagged row once (one program per row, the norm
accumulated in float32, float64 for float64 tables). The norm is computed as the CPU implementation does it:
an inf-norm whose row holds NaN is NaN (NaN-propagating maximum), so the row is not rescaled; the 2-norm's square
root, the general ``p``'s ``pow`` and the scale's division are IEEE/libdevice (Triton's ``tl.sqrt`` and
float32 ``/`` are approximate on the GPU; checked on the sm_90 code by tests/ops/test_ptx_audit.py).
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..device.cuda import graphs as _graphs
from ..dtypes.casting import cast_array
from ..runtime.configs import launch_config
from ..runtime.configs import state as config_state
from ..runtime.launcher import Tail, launch, launch_tail
from ..runtime.triton_compat import jit, tl
from ..tensor.core import Tensor, host_view, new_empty
from . import registry
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, div_rn, libdevice, maximum, nan_max, rcp_rn, sqrt_rn

__all__ = ["launch_embedding", "launch_renorm", "embedding_oracle", "renorm_oracle"]

_FN = "embedding"
_OOR = "index out of range in self"
INDEX_DTYPES = frozenset({T.int32, T.int64})


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _embedding_kernel(IDX, W, OUT, ERR, N, V, D, sidx, swv, swd, son, sod,
                      BLOCK_T: tl.constexpr, BLOCK_D: tl.constexpr):
    """``OUT[t, d] = W[IDX[t], d]`` for a tile of tokens and columns; an index outside ``[0, V)`` writes zeros
    and sets ``ERR``."""
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = t < N
    t64 = t.to(tl.int64)
    idx = tl.load(IDX + t64 * sidx, mask=t_ok, other=0).to(tl.int64)
    valid = (idx >= 0) & (idx < V)
    bad = t_ok & (valid == 0)
    tl.store(ERR + tl.zeros([BLOCK_T], tl.int32), tl.full([BLOCK_T], 1, tl.int32), mask=bad)
    row = tl.where(valid, idx, 0)
    d = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    d_ok = d < D
    d64 = d.to(tl.int64)
    w = tl.load(W + row[:, None] * swv + d64[None, :] * swd, mask=(t_ok & valid)[:, None] & d_ok[None, :], other=0)
    tl.store(OUT + t64[:, None] * son + d64[None, :] * sod, w, mask=t_ok[:, None] & d_ok[None, :])


@jit
def _embedding_mark_kernel(IDX, FLAG, ERR, N, V, sidx, BLOCK_T: tl.constexpr):
    """``FLAG[IDX[t]] = 1`` for valid indices; ``ERR = 1`` for any other."""
    t = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = t < N
    idx = tl.load(IDX + t.to(tl.int64) * sidx, mask=t_ok, other=0).to(tl.int64)
    valid = (idx >= 0) & (idx < V)
    tl.store(FLAG + tl.where(valid, idx, 0), tl.full([BLOCK_T], 1, tl.int32), mask=t_ok & valid)
    tl.store(ERR + tl.zeros([BLOCK_T], tl.int32), tl.full([BLOCK_T], 1, tl.int32), mask=t_ok & (valid == 0))


@jit
def _embedding_renorm_kernel(W, FLAG, D, swv, swd, max_norm, p, KIND: tl.constexpr, ACC: tl.constexpr,
                             BLOCK_D: tl.constexpr):
    """Rescale row ``program_id`` in place when flagged and its norm exceeds ``max_norm``. KIND: 0 general
    ``p``, 1 (``p = 1``), 2 (``p = 2``), 3 (``p = inf``), 4 (``p = 0``, the count of nonzeros)."""
    r = tl.program_id(0).to(tl.int64)
    one = tl.full([], 1.0, ACC)  # scalar arguments in ACC by arithmetic (Python floats under the interpreter)
    if tl.load(FLAG + r) != 0:
        base = W + r * swv
        offs = tl.arange(0, BLOCK_D)
        part = tl.zeros([BLOCK_D], ACC)
        for d0 in range(0, D, BLOCK_D):
            d = d0 + offs
            x = tl.abs(convert(tl.load(base + d.to(tl.int64) * swd, mask=d < D, other=0), ACC))
            if KIND == 1:
                part += x
            elif KIND == 2:
                part += x * x
            elif KIND == 3:
                part = maximum(part, x)
            elif KIND == 4:
                part += tl.where(x != 0, 1.0, 0.0).to(ACC)
            else:
                part += tl.where(x == 0, 0.0, libdevice.pow(tl.where(x == 0, 1.0, x), p * one))
        if KIND == 3:
            norm = nan_max(part, 0)
        elif KIND == 2:
            norm = sqrt_rn(tl.sum(part, 0))
        elif KIND == 0:
            norm = libdevice.pow(tl.sum(part, 0), rcp_rn(p * one))
        else:
            norm = tl.sum(part, 0)
        if norm > max_norm:
            scale = div_rn(max_norm * one, norm + 1e-7)
            for d0 in range(0, D, BLOCK_D):
                d = d0 + offs
                ptr = base + d.to(tl.int64) * swd
                x = convert(tl.load(ptr, mask=d < D, other=0), ACC)
                tl.store(ptr, convert(x * scale, W.dtype.element_ty), mask=d < D)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def launch_embedding(idx: Tensor, weight: Tensor, out: Tensor, err: Tensor) -> None:
    """``out [N, D] = weight[idx [N]]`` (1-d views); out-of-range indices set ``err``.

    Grid, sizes, strides and keywords are planned once per layout (a planned tail on CUDA)."""
    key = (idx._dtype, idx._shape, idx._stride, weight._dtype, weight._shape, weight._stride, out._shape,
           out._stride, weight._storage.device, config_state(), launch_config)
    plan = _PLANS.get(key)
    if plan is None:
        N, (V, D) = idx.shape[0], weight.shape
        cfg = launch_config("embedding", weight.device, dtypes=(weight.dtype,), cols=max(D, 1))
        bt, bd = cfg.pop("BLOCK_T"), min(cfg.pop("BLOCK_D"), max(16, 1 << max(0, D - 1).bit_length()))
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        plan = _PLANS[key] = ((_cdiv(N, bt), _cdiv(D, bd)), Tail(
            (N, V, D, idx.stride(0), weight.stride(0), weight.stride(1), out.stride(0), out.stride(1)),
            dict(BLOCK_T=bt, BLOCK_D=bd, **cfg)))
    grid, tail = plan
    if weight._storage.device.type == "cuda":
        launch_tail(_embedding_kernel, grid, (idx, weight, out, err), tail)
    else:
        launch(_embedding_kernel, grid, idx, weight, out, err, *tail.args, **tail.meta)


_PLANS: dict = {}


def _norm_kind(p: float) -> int:
    if p == 1:
        return 1
    if p == 2:
        return 2
    if math.isinf(p) and p > 0:
        return 3
    if p == 0:
        return 4
    return 0


def launch_renorm(idx: Tensor, weight: Tensor, max_norm: float, norm_type: float, err: Tensor) -> None:
    """Rescale in place the rows of ``weight`` referenced by ``idx [N]`` whose norm exceeds ``max_norm``."""
    N, (V, D) = idx.shape[0], weight.shape
    cfg = launch_config("embedding_renorm", weight.device, dtypes=(weight.dtype,), cols=max(D, 1))
    flags = new_empty((V,), T.int32, weight.device).zero_()
    bt = cfg.pop("BLOCK_T")
    launch(_embedding_mark_kernel, (_cdiv(N, bt),), idx, flags, err, N, V, idx.stride(0), BLOCK_T=bt,
           num_warps=cfg["num_warps"])
    acc = TL_DTYPES["float64" if weight.dtype is T.float64 else "float32"]
    launch(_embedding_renorm_kernel, (V,), weight, flags, D, weight.stride(0), weight.stride(1), float(max_norm),
           float(norm_type), KIND=_norm_kind(float(norm_type)), ACC=acc, **cfg)


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracles
# ---------------------------------------------------------------------------------------------------------
def _row_norms(rows: np.ndarray, p: float) -> np.ndarray:
    a = np.abs(rows)
    with np.errstate(all="ignore"):
        if p == 2:
            return np.sqrt(np.sum(a * a, axis=-1))
        if p == 1:
            return np.sum(a, axis=-1)
        if math.isinf(p) and p > 0:
            return np.max(a, axis=-1) if a.shape[-1] else np.zeros(a.shape[:-1], a.dtype)
        if p == 0:
            return np.sum(a != 0, axis=-1).astype(a.dtype)
        return np.sum(np.where(a == 0, 0.0, a ** p), axis=-1) ** (1.0 / p)


def _renorm_cpu(idx: np.ndarray, weight: Tensor, max_norm: float, norm_type: float) -> None:
    acc = T.float64 if weight.dtype is T.float64 else T.float32
    w = host_view(weight)
    rows = np.unique(idx)
    vals = cast_array(np.asarray(w[rows]), weight.dtype, acc)
    norms = _row_norms(vals, norm_type)
    big = norms > max_norm
    if np.any(big):
        sc = acc.numpy.type
        scale = (sc(max_norm) / (norms[big] + sc(1e-7))).astype(sc)
        w[rows[big]] = cast_array(vals[big] * scale[:, None], acc, weight.dtype)


def _embedding_cpu(idx: Tensor, weight: Tensor, out: Tensor, err: Tensor, *, max_norm=None, norm_type=2.0) -> None:
    ia = np.asarray(host_view(idx), dtype=np.int64)
    V = weight.shape[0]
    check(ia.size == 0 or (ia.min() >= 0 and ia.max() < V), _OOR, IndexError)
    if max_norm is not None:
        _renorm_cpu(ia, weight, max_norm, norm_type)
    host_view(out)[...] = np.asarray(host_view(weight))[ia]


def _embedding_triton(idx: Tensor, weight: Tensor, out: Tensor, err: Tensor, *, max_norm=None,
                      norm_type=2.0) -> None:
    if max_norm is not None:
        launch_renorm(idx, weight, max_norm, norm_type, err)
        check(int(err.item()) == 0, _OOR, IndexError)  # before the lookup reads rescaled rows
    launch_embedding(idx, weight, out, err)


def embedding_oracle(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, **_) -> np.ndarray:
    """float64 reference on host arrays: ``weight[input]`` after the ``max_norm`` rescale (not in place)."""
    ia = np.asarray(input, dtype=np.int64)
    w = np.asarray(weight)
    wf = cast_array(w, T.dtype_from(w.dtype), T.float64)
    if max_norm is not None:
        wf = renorm_oracle(ia, wf, max_norm, norm_type)
    return wf[ia]


def renorm_oracle(ia: np.ndarray, wf: np.ndarray, max_norm: float, norm_type: float) -> np.ndarray:
    """float64 ``embedding_renorm_`` on a copy of ``wf``."""
    wf = np.array(wf, dtype=np.float64, copy=True)
    rows = np.unique(ia)
    norms = _row_norms(wf[rows], norm_type)
    big = norms > max_norm
    wf[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None]
    return wf


# ---------------------------------------------------------------------------------------------------------
# Driver and record
# ---------------------------------------------------------------------------------------------------------
def _driver(rec, args, *, out=None, inplace=None):
    fn = _FN
    idx, weight = args["input"], args["weight"]
    check(isinstance(idx, Tensor) and isinstance(weight, Tensor), lambda: f"{fn}(): input and weight must be "
          "Tensors", TypeError)
    check(idx.dtype in INDEX_DTYPES, lambda: f"{fn}: Expected tensor for argument #1 'indices' to have one of the "
          f"following scalar types: Long, Int; but got {idx.dtype.name} instead (while checking arguments for "
          "embedding)")
    check(weight.ndim == 2, "'weight' must be 2-D")
    check(idx.device == weight.device, lambda: f"{fn}: Expected all tensors to be on the same device, but found "
          f"indices on {idx.device} and weight on {weight.device}")
    V, D = weight.shape
    pad = args["padding_idx"]
    if pad is not None:
        check(-V <= pad < V, "Padding_idx must be within num_embeddings", AssertionError)
    max_norm = args["max_norm"]
    if max_norm is not None:
        check(not weight.untyped_storage().readonly, lambda: f"{fn}: max_norm rescales weight in place, but weight's "
              "memory is read-only; clone() it first")
    res = new_empty(tuple(idx.shape) + (D,), weight.dtype, weight.device)
    n = idx.numel()
    if n == 0:
        return res
    flat = idx.reshape(n)
    err = new_empty((1,), T.int32, weight.device).zero_()
    impl = registry.impl(fn, weight.device.type)
    impl(flat, weight, res.view(n, D), err, max_norm=max_norm, norm_type=float(args["norm_type"]))
    if impl is rec.triton:  # the kernel flagged indices outside [0, num_embeddings): read it (a stream sync)
        g = _graphs.capture_of(weight.device.index) if weight.device.type == "cuda" else None
        if g is None:
            check(int(err.item()) == 0, _OOR, IndexError)
        else:  # inside a graph capture no host read can happen: the graph reads the flag in check_errors()
            g.defer_check(err, _OOR, IndexError)
    return res


def _cost(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
          sparse=False) -> Cost:
    """One read of each referenced row and of the indices, one write of the output (the ``max_norm`` pass, when
    asked, adds a read and a write of each referenced row: counted)."""
    n, D = input.numel(), weight.shape[1]
    rows = n * D * weight.dtype.itemsize
    extra = 2 * rows if max_norm is not None else 0
    return Cost(flops=0, bytes_read=rows + n * input.dtype.itemsize + extra // 2,
                bytes_written=rows + extra // 2)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


def _ix(vals):
    from ..device import device as _device
    from ..tensor.core import from_host_array
    return lambda dev: from_host_array(np.array(vals, dtype=np.int64), T.int64, _device(dev))


_ERRORS = [
    ("float indices", (_t(2), _t(5, 3)), {}, RuntimeError, "Long, Int"),
    ("index past the end", (_ix([1, 5]), _t(5, 3)), {}, IndexError, "index out of range in self"),
    ("negative index", (_ix([-1]), _t(5, 3)), {}, IndexError, "index out of range in self"),
    ("1-d weight", (_ix([1]), _t(5)), {}, RuntimeError, "must be 2-D"),
    ("padding_idx", (_ix([1]), _t(5, 3)), {"padding_idx": 5}, AssertionError, "within num_embeddings"),
    ("max_norm with a bad index", (_ix([9]), _t(5, 3)), {"max_norm": 1.0}, IndexError, "index out of range"),
]

register(OpRecord(
    name=_FN, family="embedding", cpu=_embedding_cpu, triton=_embedding_triton, oracle=embedding_oracle, cost=_cost,
    extra=dict(schema=f"{_FN}(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, "
                      "float norm_type=2.0, bool scale_grad_by_freq=False, bool sparse=False)",
               driver=_driver, namespaces=("functional",), method=False, errors=_ERRORS,
               doc=__doc__.split("\n\n")[0] + "\n\nSee :mod:`nbxtensor.ops.embedding`."),
))
