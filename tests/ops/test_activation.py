"""Activations (``nbx.nn.functional``), generated from the op table: every activation record x dtype x layout
against its float64 oracle, special values, ``inplace=True``; plus glu and the PyTorch edge cases by name."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
import nbxtensor.nn.functional as F
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import registry
from nbxtensor.ops.dispatch import promote

import pointwise_harness as H

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

RECS = H.pointwise_records("activation")
CASES = [(r, d) for r in RECS for d in H.test_dtypes(r)]


@pytest.mark.parametrize("case", CASES, ids=[f"{r.name}-{d.name}" for r, d in CASES])
def test_matches_oracle(case, device):
    rec, dt = case
    rng = np.random.default_rng(abs(hash((rec.name, dt.name))) % 2 ** 32)
    for params in H.param_cases(rec):
        if dt not in H.allowed(rec, params):
            continue
        for layout in H.layouts(device):
            if layout == "odd_big" and (dt not in (T.float32, T.int32) or device != "cpu"):
                continue
            H.check_oracle(rec, dt, device, layout, params, rng)


# float64 in the quick tiers too: the only Triton run of the float64 kernels there
SPECIAL = [(r, d) for r in RECS for d in (H.FLOAT_DTYPES if not H.QUICK else [T.float32, T.float64])
           if d in H.allowed(r)]


@pytest.mark.parametrize("case", SPECIAL, ids=[f"{r.name}-{d.name}" for r, d in SPECIAL])
def test_special_values(case, device):
    rec, dt = case
    sv = cast_array(np.array(H.SPECIAL[dt] + [-30.0, 30.0, 25.0]), T.float64, dt)  # + the softplus threshold
    for params in H.param_cases(rec):
        x = nbx.from_numpy(sv).to(device)
        res = rec.extra["function"](x, **params)
        prom = promote(H._kind(rec, params), x)
        exp, _ = H.expected(rec, [sv], [dt], res.dtype, prom, H.oracle_params(rec, [x], params, prom))
        extra = rec.extra.get("tolerance")
        ea = None if not extra else np.nan_to_num(extra["extra_atol"](cast_array(sv, dt, T.float64)), posinf=0.0)
        H.assert_close(H.result_host(res), exp, res.dtype, extra_atol=ea, what=f"{rec.name} specials {params}")


INPLACE = [r for r in RECS if any(a.name == "inplace" for a in r.extra["public_schema_obj"].args)]


@pytest.mark.parametrize("rec", INPLACE, ids=[r.name for r in INPLACE])
def test_inplace_flag(rec, device):
    """``F.op(x, inplace=True)`` writes into x and returns it; the default leaves x alone."""
    params = H.param_cases(rec)[0]
    x = nbx.tensor([[-2.0, -0.5, 0.0], [0.5, 2.0, 7.0]], device=device)
    before = x.tolist()
    ref = rec.extra["function"](x, **params)
    assert x.tolist() == before
    y = x.clone()
    r = rec.extra["function"](y, **params, inplace=True)
    assert r is y
    np.testing.assert_array_equal(H.result_host(y), H.result_host(ref))


def test_glu(device):
    x = nbx.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10 - 1).to(device)
    for dim in (-1, 0, 2):
        a, b = np.split(x.cpu().numpy().astype(np.float64), 2, axis=dim)
        exp = a / (1 + np.exp(-b))
        np.testing.assert_allclose(F.glu(x, dim).cpu().numpy(), exp, rtol=1e-6, atol=1e-6)
    xt = x.transpose(0, 2)  # strided halves
    a, b = np.split(xt.cpu().numpy().astype(np.float64), 2, axis=-1)
    np.testing.assert_allclose(F.glu(xt).cpu().numpy(), a / (1 + np.exp(-b)), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match="Halving dimension must be even"):
        F.glu(nbx.ones(2, 3, device=device), 1)
    with pytest.raises(RuntimeError, match="scalars"):
        F.glu(nbx.tensor(1.0, device=device))
    h = F.glu(nbx.ones(2, 4, dtype=nbx.float16, device=device))
    assert h.dtype is nbx.float16 and tuple(h.shape) == (2, 2)


def test_pytorch_edge_cases(device):
    nan = float("nan")
    r = F.relu(nbx.tensor([nan, -1.0, 2.0], device=device)).tolist()
    assert np.isnan(r[0]) and r[1:] == [0.0, 2.0]
    assert np.isnan(F.relu6(nbx.tensor([nan], device=device)).tolist()[0])
    assert F.relu6(nbx.tensor([-1.0, 3.0, 9.0], device=device)).tolist() == [0.0, 3.0, 6.0]
    assert F.relu(nbx.tensor([-3, 4], device=device)).tolist() == [0, 4]
    assert F.softplus(nbx.tensor([30.0, 1.0], device=device)).tolist()[0] == 30.0  # above the threshold: x
    assert F.threshold(nbx.tensor([0.5, 2.0, nan], device=device), 1.0, -1.0).tolist()[:2] == [-1.0, 2.0]
    assert np.isnan(F.threshold(nbx.tensor([nan], device=device), 1.0, -1.0).tolist()[0])
    assert F.hardtanh(nbx.tensor([-3, 0, 3], dtype=nbx.int8, device=device)).tolist() == [-1, 0, 1]
    with pytest.raises(ValueError, match="min_val cannot be greater than max_val"):
        F.hardtanh(nbx.tensor([1.0], device=device), 2.0, 1.0)
    with pytest.raises(RuntimeError, match="alpha cannot be 0"):
        F.celu(nbx.tensor([1.0], device=device), 0.0)
    with pytest.raises(NotImplementedError, match="Long"):
        F.gelu(nbx.tensor([1], device=device))
    assert F.softsign(nbx.tensor([1, -3], device=device)).tolist() == [0.5, -0.75]
    assert nbx.sigmoid(nbx.tensor([0], device=device)).tolist() == [0.5]
    assert nbx.relu is F.relu and nbx.Tensor.relu is F.relu and F.sigmoid is nbx.sigmoid
    g = F.gelu(nbx.tensor([1.0], device=device), approximate="tanh").tolist()[0]
    assert abs(g - 0.8411919906082768) < 1e-6
    x = nbx.tensor([-1.0, 2.0], device=device)
    assert x.relu_() is x and x.tolist() == [0.0, 2.0]


def test_activation_records_export():
    names = {r.name for r in registry.all_ops() if r.family == "activation"}
    for n in ("relu", "relu6", "gelu", "silu", "mish", "softplus", "sigmoid", "logsigmoid", "hardsigmoid",
              "hardswish", "hardtanh", "elu", "celu", "selu", "leaky_relu", "threshold", "glu", "softsign",
              "tanhshrink"):
        assert n in names and callable(getattr(F, n)), n


# ---------------------------------------------------------------------------------------------------------
# The fast bodies of 16-bit outputs (ops/activation.py): every finite value of the dtype
# ---------------------------------------------------------------------------------------------------------
FAST_CASES = [("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("mish", {}), ("softplus", {}),
              ("softplus", {"beta": 2.0, "threshold": 5.0}), ("logsigmoid", {}), ("elu", {}), ("elu", {"alpha": 0.5}),
              ("selu", {}), ("celu", {"alpha": 2.0}), ("sigmoid", {}), ("hardswish", {}), ("hardsigmoid", {})]


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("case", FAST_CASES, ids=[f"{n}{'-' + '-'.join(map(str, k.values())) if k else ''}"
                                                  for n, k in FAST_CASES])
def test_fast_bodies_round_like_the_oracle(case, dt, device):
    """16-bit outputs of the smooth activations come from the fast float32 bodies (exp2/reciprocal instructions,
    no IEEE division): over every finite input of the dtype each result is within the tolerance of the float64
    oracle, at most one unit in the last place from the correctly rounded value, and equal to it for all but a
    few inputs next to rounding ties (on the GPU the approximations' own error adds a few more)."""
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("the cpu device computes with NumPy; the bodies run under the interpreter or on a GPU")
    name, kw = case
    H.check_fast_dense(registry.get(name), kw, dt, device)
