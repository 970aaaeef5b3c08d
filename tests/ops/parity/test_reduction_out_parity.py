"""Parity with PyTorch (CPU) for reductions and scans called with an ``out=`` of another dtype than their result,
and with ``dtype=`` next to ``out=``. PyTorch's rules differ per op: ``sum``, ``prod``, ``nansum``, ``cumsum``,
``cumprod`` and ``mean`` compute in out's dtype (the input converted to it first: ``sum(bf16, out=float32)``
accumulates in float32, ``sum(float32, out=int64)`` sums the truncated elements); ``var``/``std`` accept any out
their result casts to and compute in it; ``logsumexp`` any floating out; ``amax``/``amin``, ``argmax``, ``norm``,
``max(dim)``, ``aminmax``, ``softmax``, ``logcumsumexp``, ``cummax`` only out's of the result dtype; ``all``/``any``
bool or uint8 outs. For a matrix of (op, input dtype, out dtype[, dtype=]) both refuse with the same exception type
and a message naming the same dtypes, or both write the same values (within the looser of the result's and out's
tolerances; integer and bool outs exactly).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_out_dtype_parity import same_refusal  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]

INS = [T.bfloat16, T.float16, T.float32, T.float64, T.int32, T.int64, T.uint8, T.bool_]
OUTS = [T.bfloat16, T.float16, T.float32, T.float64, T.int32, T.int64, T.int8, T.bool_]
# (name, call(module, x, **kw)): the op along dim 1 of a (5, 7) input
OPS = {
    "sum": lambda m, x, **k: m.sum(x, 1, **k),
    "nansum": lambda m, x, **k: m.nansum(x, 1, **k),
    "mean": lambda m, x, **k: m.mean(x, 1, **k),
    "nanmean": lambda m, x, **k: m.nanmean(x, 1, **k),
    "prod": lambda m, x, **k: m.prod(x, 1, **k),
    "amax": lambda m, x, **k: m.amax(x, 1, **k),
    "amin": lambda m, x, **k: m.amin(x, 1, **k),
    "all": lambda m, x, **k: m.all(x, 1, **k),
    "any": lambda m, x, **k: m.any(x, 1, **k),
    "logsumexp": lambda m, x, **k: m.logsumexp(x, 1, **k),
    "var": lambda m, x, **k: m.var(x, 1, **k),
    "std": lambda m, x, **k: m.std(x, 1, correction=0, **k),
    "argmax": lambda m, x, **k: m.argmax(x, 1, **k),
    "argmin": lambda m, x, **k: m.argmin(x, 1, **k),
    "vector_norm": lambda m, x, **k: (m.linalg.vector_norm if m is torch else m.vector_norm)(x, 2, 1, **k),
    "norm": lambda m, x, **k: m.norm(x, 1, 1, **k),
    "cumsum": lambda m, x, **k: m.cumsum(x, 1, **k),
    "cumprod": lambda m, x, **k: m.cumprod(x, 1, **k),
    "logcumsumexp": lambda m, x, **k: m.logcumsumexp(x, 1, **k),
    "softmax": lambda m, x, **k: m.softmax(x, 1, **k),
    "log_softmax": lambda m, x, **k: m.log_softmax(x, 1, **k),
}
TUPLE_OPS = {   # ops with two outputs: (values dtype from the out matrix, second output's dtype)
    "max": (lambda m, x, **k: m.max(x, 1, **k), "int64"),
    "cummax": (lambda m, x, **k: m.cummax(x, 1, **k), "int64"),
    "aminmax": (lambda m, x, **k: m.aminmax(x, dim=1, **k), None),
}
DTYPE_ARG = {"sum", "nansum", "mean", "nanmean", "prod", "cumsum", "cumprod", "vector_norm", "softmax"}


def _host(dt: T.DType) -> np.ndarray:
    rng = np.random.default_rng(11)
    a = rng.standard_normal((5, 7)) * 1.7
    a[0, :3] = [0.7, 0.7, 0.7]   # truncated to 0 before an integer sum; 2 after
    if dt.kind == T.KIND_BOOL:
        return a > 0
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        return np.abs(np.round(a * 2)).astype(dt.numpy) if dt.kind == T.KIND_UINT else np.round(a * 2).astype(dt.numpy)
    return cast_array(a, T.float64, dt)


def to_torch(a: np.ndarray, dt: T.DType):
    if dt is T.bfloat16:
        return torch.from_numpy(np.ascontiguousarray(a).view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(a).copy())


def from_torch(t) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.uint16).numpy().view(T.bfloat16.numpy).copy()
    return t.contiguous().numpy().copy()


def _tol(dts):
    tols = [nbx.dtypes.tolerance(d) for d in dts if d.kind == T.KIND_FLOAT]
    return max(tols, key=lambda t: t.rtol)


def _compare(what, call, dt, od, kw, n_outs=1, od2=None):
    """Run ``call`` on both sides with outs of ``od`` (and ``od2``); same error type and dtype names, or values."""
    host = _host(dt)
    tx, nx = to_torch(host, dt), nbx.from_numpy(host)
    try:
        ref = call(torch, tx, **{k: getattr(torch, v.name) for k, v in kw.items()})
    except Exception:  # noqa: BLE001 - calls PyTorch refuses without out= are the generic parity suite's
        return 0
    ref = ref if isinstance(ref, tuple) else (ref,)
    ods = [od] if n_outs == 1 else [od, od2 or od]
    touts = [torch.empty(0, dtype=getattr(torch, d.name)) for d in ods]
    nouts = [nbx.empty(0, dtype=d) for d in ods]
    et = eo = None
    try:
        call(torch, tx, **{k: getattr(torch, v.name) for k, v in kw.items()},
             out=touts[0] if n_outs == 1 else tuple(touts))
    except Exception as e:  # noqa: BLE001
        et = e
    try:
        call(nbx, nx, **kw, out=nouts[0] if n_outs == 1 else tuple(nouts))
    except Exception as e:  # noqa: BLE001
        eo = e
    if same_refusal(what, et, eo):
        return 0
    for t, n, r in zip(touts, nouts, ref):
        a, b = n.numpy(), from_torch(t)
        assert a.shape == b.shape, what
        d = n.dtype
        if d.kind != T.KIND_FLOAT:
            np.testing.assert_array_equal(a, b, err_msg=what)
            continue
        tol = _tol([d, T.dtype_from(str(r.dtype).replace("torch.", "")), dt])
        n_red = host.shape[1]
        np.testing.assert_allclose(cast_array(a, d, T.float64), cast_array(b, d, T.float64), rtol=tol.rtol * 4,
                                   atol=tol.atol * 4 * n_red, equal_nan=True, err_msg=what)
    return 1


@pytest.mark.parametrize("name", sorted(OPS))
def test_out_dtype_matrix_matches_pytorch(name):
    checked = 0
    for dt in INS:
        for od in OUTS:
            checked += _compare(f"{name}({dt.name}, out={od.name})", OPS[name], dt, od, {})
    assert checked, name


@pytest.mark.parametrize("name", sorted(DTYPE_ARG))
def test_dtype_and_out_together_match_pytorch(name):
    checked = 0
    for dt in (T.bfloat16, T.float32, T.int32):
        for kd in (T.float32, T.float64, T.int64):
            for od in (T.float32, T.float64, T.int64, T.bfloat16):
                checked += _compare(f"{name}({dt.name}, dtype={kd.name}, out={od.name})", OPS[name], dt, od,
                                    {"dtype": kd})
    assert checked, name


@pytest.mark.parametrize("name", sorted(TUPLE_OPS))
def test_two_output_ops_match_pytorch(name):
    call, second = TUPLE_OPS[name]
    for dt in (T.bfloat16, T.float32, T.int64):
        for od in (T.float32, T.float64, T.int64):
            for od2 in ((T.int64, T.int32) if second else (od, dt)):
                _compare(f"{name}({dt.name}, out=({od.name}, {od2.name}))", call, dt, od, {}, n_outs=2, od2=od2)


def _bf16(vals):
    return to_torch(cast_array(np.array(vals, dtype=np.float64), T.float64, T.bfloat16), T.bfloat16)


@pytest.mark.parametrize("od", ["float32", "float64"])
@pytest.mark.parametrize("op", ["sum", "nansum", "mean", "cumsum", "logsumexp", "var"])
def test_bf16_input_into_wider_outs_is_not_rounded_to_bf16(op, od):
    """The witness: 1 + 2**-8 + 2**-9 (exact in float32) is 1.0078125 in bfloat16; PyTorch writes the wide value.
    (Two rows: PyTorch 2.13's CPU ``var`` of bfloat16 over a single row raises "std_var_all: Unsupported dtype".)"""
    t = _bf16([[1.0, 2.0 ** -8, 2.0 ** -9, 0.0]] * 2)
    n = nbx.from_numpy(from_torch(t))
    to, no = torch.empty(0, dtype=getattr(torch, od)), nbx.empty(0, dtype=getattr(nbx, od))
    OPS[op](torch, t, out=to)
    OPS[op](nbx, n, out=no)
    a, b = no.numpy(), to.numpy()
    narrow = cast_array(from_torch(OPS[op](torch, t)), T.bfloat16, T.float64)
    assert not np.array_equal(a.astype(np.float64), narrow)
    if op in ("sum", "nansum", "cumsum"):
        np.testing.assert_array_equal(a, b)
        assert a.reshape(-1)[-1] == 1.005859375
    elif op == "logsumexp":   # PyTorch rounds exp(x - max) to the input's bfloat16 before summing in out's dtype
        np.testing.assert_allclose(a, b, rtol=nbx.dtypes.tolerance(T.bfloat16).rtol)
    else:
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_integer_out_sums_the_truncated_elements():
    t = torch.tensor([[0.7, 0.7, 0.7, 1.6], [2.5, -1.5, 3.7, 0.2]])
    for od in ("int64", "int32", "int8"):
        to, no = torch.empty(0, dtype=getattr(torch, od)), nbx.empty(0, dtype=getattr(nbx, od))
        torch.sum(t, 1, out=to)
        nbx.sum(nbx.from_numpy(t.numpy()), 1, out=no)
        assert no.tolist() == to.tolist() == [1, 4]


def test_dtype_disagreeing_with_out_names_both():
    x = nbx.ones(2, 3)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float instead"):
        nbx.sum(x, 1, dtype=nbx.float64, out=nbx.empty(2))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float instead"):
        torch.sum(torch.ones(2, 3), 1, dtype=torch.float64, out=torch.empty(2))
