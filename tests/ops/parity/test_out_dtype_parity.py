"""Parity with PyTorch (CPU) for ``out=`` tensors of another dtype than the op's result (issue 4): PyTorch computes
in the result dtype (the operands' promoted dtype), rounds there, then casts to out's dtype, and refuses outs the
result cannot be cast to (``can_cast``) or, for some ops, any out of another dtype. For a matrix of (op, input
dtype, out dtype) both refuse with the same exception type and a message naming the same dtypes, or both write
the same values (bit for bit where the op is correctly rounded in float32).
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pointwise_harness as H  # noqa: E402
from test_elementwise_parity import from_torch, to_torch, torch_fn  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]

INS = [T.bfloat16, T.float16, T.float32, T.float64, T.int32, T.int64, T.uint8, T.bool_, T.float8_e4m3fn]
OUTS = [T.bfloat16, T.float16, T.float32, T.float64, T.int32, T.int64, T.bool_]
# correctly rounded in float32 (and float64): nbxtensor and PyTorch must agree bit for bit
# (without parameters: add/sub with alpha and addcmul fuse a multiply-add differently on PyTorch's CPU)
EXACT = {"add", "sub", "mul", "div", "square", "maximum", "minimum", "fmax", "fmin", "abs", "neg", "floor",
         "ceil", "trunc", "frac", "sign", "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
         "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "where", "clamp",
         "clamp_min", "clamp_max", "copysign", "isposinf", "isneginf", "signbit", "nan_to_num"}
# pre-existing differences that have nothing to do with out= (the generic parity suite declares or covers them)
SKIP = {"rsub": "torch.rsub has no out= argument (nbxtensor's is a superset)",
        "outer": "vectors only (tests/ops/parity/test_matmul_parity.py)", "addr": "matmul family"}
RECS = [r for r in registry.all_ops() if r.extra.get("kind") == "pointwise" and "out" in r.extra.get("schema", "")
        and r.extra.get("generic_test", True) and r.name not in SKIP]
_TORCH_NAMES = ("BFloat16", "Half", "Float", "Double", "Int", "Long", "Char", "Byte", "Bool", "Float8_e4m3fn")


def _names(msg: str) -> list[str]:
    return sorted(set(re.findall(r"\b(" + "|".join(_TORCH_NAMES) + r")\b", msg)))


def same_refusal(what: str, et, eo) -> bool:
    """Compare how PyTorch (``et``: its exception or None) and nbxtensor (``eo``) ended one out= call: when PyTorch
    raised, nbxtensor must raise the same type with the dtype names of PyTorch's first line, and True is returned;
    when PyTorch computed, nbxtensor must compute too (False: compare the values)."""
    if et is not None:
        assert eo is not None, f"{what}: PyTorch raises {type(et).__name__}: {et}; nbxtensor computes"
        assert type(eo) is type(et), f"{what}: {type(eo).__name__}: {eo} vs PyTorch {type(et).__name__}: {et}"
        msg_t = str(et).split("\n")[0]
        assert set(_names(msg_t)) <= set(_names(str(eo))), f"{what}: '{eo}' vs PyTorch '{msg_t}'"
        return True
    assert eo is None, f"{what}: nbxtensor raises {type(eo).__name__}: {eo}; PyTorch computes"
    return False


def _tolerance(result: T.DType, out: T.DType):
    """The looser of the result's and out's tolerances (the value is rounded to both)."""
    tols = [nbx.dtypes.tolerance(d) for d in (result, out) if d.kind == T.KIND_FLOAT]
    return max(tols, key=lambda t: t.rtol)


@pytest.mark.parametrize("rec", RECS, ids=[r.name for r in RECS])
def test_out_dtype_matrix_matches_pytorch(rec):
    names = rec.extra["schema_obj"].operands
    checked = 0
    for dt in INS:
        rng = np.random.default_rng(5)
        nargs, targs = [], []
        for k, n in enumerate(names):
            if n in rec.extra.get("scalar_operands", ()):
                nargs.append(2)
                targs.append(2)
                continue
            x = nbx.from_numpy(H.values(rec, H._operand_dtype(rec, k, dt), (6, 7), rng, k))
            nargs.append(x)
            targs.append(to_torch(x))
        for params in H.param_cases(rec):
            try:   # cases PyTorch refuses without out= are the generic parity suite's
                ref = torch_fn(rec)(*targs, **params)
            except Exception:  # noqa: BLE001
                continue
            for od in OUTS:
                what = f"{rec.name}({dt.name}, {params}, out={od.name})"
                to, no = torch.empty(ref.shape, dtype=getattr(torch, od.name)), nbx.empty(*ref.shape, dtype=od)
                et = eo = None
                try:
                    torch_fn(rec)(*targs, **params, out=to)
                except Exception as e:  # noqa: BLE001
                    et = e
                try:
                    rec.extra["function"](*nargs, **params, out=no)
                except Exception as e:  # noqa: BLE001
                    eo = e
                if same_refusal(what, et, eo):
                    continue
                checked += 1
                a, b = no.numpy(), from_torch(to)
                if od.kind != T.KIND_FLOAT:
                    np.testing.assert_array_equal(a, b, err_msg=what)
                    continue
                a64, b64 = cast_array(a, od, T.float64), cast_array(b, od, T.float64)
                if rec.name in EXACT and not params:
                    np.testing.assert_array_equal(a64, b64, err_msg=what)   # NaN == NaN for assert_array_equal
                    continue
                res = T.dtype_from(str(ref.dtype))
                tol = _tolerance(res, od)
                np.testing.assert_allclose(a64, b64, rtol=tol.rtol * 2, atol=tol.atol * 2, equal_nan=True,
                                           err_msg=what)
    assert checked, rec.name


def _bf16_pairs():
    """bfloat16 pairs whose float32 product is not a bfloat16 value (the bug's witnesses)."""
    a = torch.tensor([1.75, 1.75, 3.140625, 1.0078125], dtype=torch.bfloat16)
    b = torch.tensor([1.7578125, 1.3828125, 1.75, 1.0078125], dtype=torch.bfloat16)
    return a, b


@pytest.mark.parametrize("od", ["float32", "float64", "float16"])
@pytest.mark.parametrize("op", ["mul", "add", "div", "sub", "atan2", "hypot"])
def test_bf16_results_into_other_float_outs_bit_for_bit(op, od):
    a, b = _bf16_pairs()
    to = torch.empty(4, dtype=getattr(torch, od))
    getattr(torch, op)(a, b, out=to)
    no = nbx.empty(4, dtype=getattr(nbx, od))
    getattr(nbx, op)(nbx.from_numpy(from_torch(a)), nbx.from_numpy(from_torch(b)), out=no)
    np.testing.assert_array_equal(no.numpy(), to.numpy())
    if op == "mul" and od == "float32":
        assert no.tolist()[0] == 3.078125 != float(a[0].float() * b[0].float())


def test_inplace_forms_match_pytorch():
    h = torch.tensor([1.0009765625, 3.0, 0.1], dtype=torch.float16)
    b = torch.tensor([1.7578125, 1.0, 3.0], dtype=torch.bfloat16)
    nh, nb = nbx.from_numpy(h.numpy()), nbx.from_numpy(from_torch(b))
    h.mul_(b)
    nh.mul_(nb)
    np.testing.assert_array_equal(nh.numpy(), h.numpy())
    for expr in (lambda m, x: x.clone().sin_(), lambda m, x: x.clone().abs_()):
        np.testing.assert_array_equal(expr(nbx, nh).numpy(), expr(torch, h).numpy())
    with pytest.raises(RuntimeError, match="can't be cast"):
        torch.tensor([1, 2]).mul_(b[:2])
    with pytest.raises(RuntimeError, match="result type BFloat16 can't be cast to the desired output type Long"):
        nbx.tensor([1, 2]).mul_(nb[:2])
