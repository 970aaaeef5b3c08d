"""Parity of the matrix products with PyTorch on CPU: ``matmul``'s broadcasting and 1-D rules (shapes and values),
the records' error data (PyTorch raises the same exception type with the same message), ``einsum`` equations,
``outer``/``addr`` promotion, ``beta = 0`` semantics and the TF32 switches' defaults.

Stated differences (skipped here): integer and bool ``mm``/``einsum`` (PyTorch's CPU has them; nbxtensor raises
NotImplementedError, as PyTorch's CUDA does for mm), einsum equations outside two-operand contractions.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402
from nbxtensor.dtypes.tolerance import tolerance  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

pytestmark = pytest.mark.parity

RNG = np.random.default_rng(7)


def pair(shape, dt="float32"):
    a = RNG.uniform(-1, 1, size=shape).astype(np.float32)
    t = torch.from_numpy(a).to(getattr(torch, dt))
    x = nbx.tensor(cast_array(t.float().numpy().astype(np.float64), T.float64, getattr(nbx, dt)),
                   dtype=getattr(nbx, dt))
    return t, x


def close(x, t, dt, K):
    got = cast_array(np.asarray(x.numpy()), x.dtype, T.float64)
    exp = t.double().numpy()
    tol = tolerance(x.dtype, reduced=max(K, 1))
    np.testing.assert_allclose(got, exp, rtol=2 * tol.rtol, atol=2 * tol.atol)


def outcome(fn):
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - comparing what both libraries raise
        return type(e).__name__, str(e).splitlines()[0]


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
                 ((1, 2, 3), (6, 3, 4)), ((2, 1, 4, 3), (1, 5, 3, 2)), ((0, 2, 3), (3, 4)), ((2, 2, 0), (2, 0, 5)),
                 ((3,), (4,)), ((2, 3), (4,)), ((3,), (4, 5)), ((2, 3), (4, 5)), ((2, 2, 3), (3, 3, 4)),
                 ((2, 2, 3), (2, 4, 4)), ((2, 2, 3), (4,)), ((3,), (2, 4, 5)), ((2, 3), (2, 4, 5)), ((), (3,)),
                 ((7, 1, 5, 9), (3, 9, 2)), ((1,), (1, 1, 1)), ((4, 0), (0,))]


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64"])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_shapes_and_values(sa, sb, dt):
    ta, xa = pair(sa, dt)
    tb, xb = pair(sb, dt)
    kt, rt = outcome(lambda: torch.matmul(ta, tb))
    kx, rx = outcome(lambda: nbx.matmul(xa, xb))
    assert kt == kx, (kt, rt, kx, rx)
    if kt != "ok":
        assert rt == rx
        return
    assert tuple(rx.shape) == tuple(rt.shape) and rx.dtype.name == str(rt.dtype).split(".")[-1]
    close(rx, rt, dt, sa[-1] if sa else 1)


def _torch_fn(rec):
    if rec.name == "linear":
        return torch.nn.functional.linear
    return getattr(torch, rec.name)


ERRORS = [(r, i, e) for r in registry.all_ops() if r.family == "matmul"
          for i, e in enumerate(r.extra.get("errors", [])) if e[2] is not NotImplementedError]


@pytest.mark.parametrize("case", ERRORS, ids=[f"{r.name}-{i}" for r, i, _ in ERRORS])
def test_error_data_matches_pytorch(case):
    """Each error case of the records, run in PyTorch: same exception type, and PyTorch's message contains the
    text the record expects."""
    rec, _, (make_args, kwargs, exc, text) = case
    kw = kwargs(torch) if callable(kwargs) else kwargs
    with pytest.raises(Exception) as info:
        _torch_fn(rec)(*make_args(torch), **kw)
    assert isinstance(info.value, exc), (type(info.value), exc)
    if exc is TypeError:  # Python-level argument errors: PyTorch words them with its own prefix
        return
    assert text in str(info.value), (text, str(info.value))


EINSUM = [("ij,jk->ik", [(4, 5), (5, 3)]), ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)]), ("bhqk,bhkd->bhqd", [(2, 3, 5, 7), (2, 3, 7, 8)]),
          ("i,i->", [(9,), (9,)]), ("i,j->ij", [(4,), (6,)]), ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)]),
          ("ij,jk", [(4, 5), (5, 3)]), ("ij,kj->ki", [(4, 5), (3, 5)]), ("ij,jk->ik", [(3, 1), (3, 2)]),
          ("bij,bjk->bik", [(1, 4, 5), (3, 5, 2)]), ("i j,j k->k i", [(4, 5), (5, 3)]),
          ("...ij,jk", [(2, 3, 3), (3, 2)]), ("bid,bjd->bij", [(2, 3, 4), (2, 5, 4)]), ("Ab,bC->AC", [(2, 3), (3, 4)])]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes):
    ts, xs = zip(*[pair(s) for s in shapes])
    rt = torch.einsum(eq, *ts)
    rx = nbx.einsum(eq, *xs)
    assert tuple(rx.shape) == tuple(rt.shape)
    close(rx, rt, "float32", max(shapes[0]))


@pytest.mark.parametrize("d1,d2", [("float32", "float16"), ("bfloat16", "float16"), ("int32", "float32"),
                                   ("bool", "bool"), ("int64", "int8"), ("bool", "int32")])
def test_outer_addr_promotion(d1, d2):
    a = torch.tensor([1, 0, 1]).to(getattr(torch, d1))
    b = torch.tensor([1, 1]).to(getattr(torch, d2))
    xa = nbx.tensor(a.numpy() if d1 != "bfloat16" else a.float().numpy(), dtype=getattr(nbx, d1))
    xb = nbx.tensor(b.numpy(), dtype=getattr(nbx, d2))
    rt, rx = torch.outer(a, b), nbx.outer(xa, xb)
    assert rx.dtype.name == str(rt.dtype).split(".")[-1]
    assert np.array_equal(cast_array(np.asarray(rx.numpy()), rx.dtype, T.float64), rt.double().numpy())
    s = torch.ones(3, 2, dtype=getattr(torch, d1))
    xs = nbx.ones(3, 2, dtype=getattr(nbx, d1))
    rt, rx = torch.addr(s, a, b), nbx.addr(xs, xa, xb)
    assert rx.dtype.name == str(rt.dtype).split(".")[-1]
    assert np.array_equal(cast_array(np.asarray(rx.numpy()), rx.dtype, T.float64), rt.double().numpy())


def test_beta_zero_and_k0():
    nan_t, nan_x = torch.full((2, 3), float("nan")), nbx.full((2, 3), float("nan"))
    ta, xa = pair((2, 4))
    tb, xb = pair((4, 3))
    close(nbx.addmm(nan_x, xa, xb, beta=0), torch.addmm(nan_t, ta, tb, beta=0), "float32", 4)
    close(nbx.addmm(nbx.ones(2, 3), nbx.empty(2, 0), nbx.empty(0, 3), beta=2),
          torch.addmm(torch.ones(2, 3), torch.empty(2, 0), torch.empty(0, 3), beta=2), "float32", 1)
    close(nbx.addr(nbx.full((2, 2), float("nan")), nbx.ones(2), nbx.ones(2), beta=0),
          torch.addr(torch.full((2, 2), float("nan")), torch.ones(2), torch.ones(2), beta=0), "float32", 1)


def test_linear_shapes():
    F, G = torch.nn.functional, nbx.nn.functional
    for xs, ws, bs in [((2, 3), (4, 3), (4,)), ((5, 2, 3), (4, 3), (2, 4)), ((3,), (4, 3), (4,)), ((3,), (3,), ()),
                       ((2, 3), (3,), None), ((5, 2, 3), (4, 3), None)]:
        tx, xx = pair(xs)
        tw, xw = pair(ws)
        tb, xb = pair(bs) if bs is not None else (None, None)
        rt, rx = F.linear(tx, tw, tb), G.linear(xx, xw, xb)
        assert tuple(rx.shape) == tuple(rt.shape), (xs, ws, bs)
        close(rx, rt, "float32", xs[-1] + 1)


def test_tf32_defaults():
    assert nbx.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    assert nbx.get_float32_matmul_precision() == torch.get_float32_matmul_precision()
