"""The shared host pipeline (ops/dispatch.py): schemas and argument binding, promotion kinds, wrapped
scalars, output allocation and out= rules, in-place checks, overlap checks, and the generation of functions,
methods and operators from a record."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.ops import dispatch as D
from nbxtensor.ops.registry import Cost, OpRecord, register


def test_parse_schema():
    s = D.parse_schema("add(Tensor input, Tensor|Scalar other, *, Scalar alpha=1, Tensor? out=None)")
    assert s.name == "add" and s.operands == ("input", "other") and s.params == ("alpha",) and s.has_out
    a = {x.name: x for x in s.args}
    assert a["other"].types == ("Tensor", "Scalar") and a["alpha"].kwonly and a["alpha"].default == 1
    assert a["out"].optional and not a["input"].optional
    s2 = D.parse_schema("gelu(Tensor input, *, str approximate='none')")
    assert s2.params == ("approximate",) and s2.args[1].default == "none"
    s3 = D.parse_schema("relu(Tensor input, bool inplace=False)")
    assert s3.params == ()  # nn.functional's inplace flag is the generated function's business
    with pytest.raises(ValueError, match="malformed"):
        D.parse_schema("add(Tensor input")


def test_bind_checks_like_pytorch():
    s = D.parse_schema("add(Tensor input, Tensor|Scalar other, *, Scalar alpha=1, Tensor? out=None)")
    x = nbx.tensor([1.0])
    assert s.bind((x, 2), {})["alpha"] == 1
    assert s.bind((x,), {"other": np.float32(2.5)})["other"] == 2.5  # NumPy scalars become Python numbers
    with pytest.raises(TypeError, match=r"add\(\): argument 'input' \(position 1\) must be Tensor, not int"):
        s.bind((1, x), {})
    with pytest.raises(TypeError, match="takes 2 positional arguments but 3 were given"):
        s.bind((x, 1, 2), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'beta'"):
        s.bind((x, 1), {"beta": 2})
    with pytest.raises(TypeError, match="multiple values for argument 'other'"):
        s.bind((x, 1), {"other": 2})
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        s.bind((x,), {})
    with pytest.raises(TypeError, match="must be Tensor or Scalar, not str"):
        s.bind((x, "a"), {})
    with pytest.raises(TypeError, match="NoneType"):
        s.bind((x, None), {})
    s2 = D.parse_schema("f(Tensor input, int dim=-1, float eps=1e-05, str? mode=None)")
    assert s2.bind((x,), {"eps": 1})["eps"] == 1.0
    with pytest.raises(TypeError):
        s2.bind((x, 1.5), {})
    with pytest.raises(TypeError):
        s2.bind((x, True), {})


def test_promotion_kinds():
    i = nbx.tensor([1], dtype=nbx.int32)
    h = nbx.tensor([1.0], dtype=nbx.float16)
    b = nbx.tensor([True])
    c = nbx.tensor([1.0], dtype=nbx.complex64)
    p = D.promote("default", i, 2.5)
    assert (p.common, p.compute, p.result) == (T.float32, T.float32, T.float32)
    p = D.promote("default", h, 2.5)
    assert (p.common, p.compute, p.result) == (T.float16, T.float32, T.float16)  # opmath
    p = D.promote("no_opmath", h)
    assert p.compute is T.float16
    p = D.promote("int_to_float", i)
    assert p.result is nbx.get_default_dtype()
    p = D.promote("always_bool", h, i)
    assert p.common is T.float16 and p.result is T.bool_
    p = D.promote("complex_to_float", c)
    assert p.result is T.float32
    p = D.promote("bool_to_long", b)
    assert p.result is T.int64
    assert D.promote("default", nbx.tensor([200], dtype=nbx.uint8), 100).result is T.uint8
    with pytest.raises(ValueError, match="unknown promotion kind"):
        D.promote("weird", i)
    with pytest.raises(RuntimeError, match="float8"):
        D.promote("default", nbx.tensor([1.0], dtype=nbx.float8_e4m3fn), h)


def test_scalar_to():
    assert D.scalar_to(300, T.uint8) == 44
    assert D.scalar_to(-1, T.uint8) == 255
    assert D.scalar_to(2 ** 63, T.int64) == -2 ** 63
    assert D.scalar_to(2.7, T.int32) == 2
    assert D.scalar_to(0.1, T.float32) == np.float32(0.1)
    assert D.scalar_to(3, T.bool_) and not D.scalar_to(0.0, T.bool_)
    assert D.scalar_to(1e10, T.float16) == np.inf
    with pytest.raises(RuntimeError, match="without overflow"):
        D.scalar_to(float("nan"), T.int32)


def test_resolve_out_rules():
    x = D.resolve_out(None, (2, 3), T.float32, nbx.device("cpu"), "f")
    assert tuple(x.shape) == (2, 3) and x.dtype is T.float32
    out = nbx.empty(2, 3, dtype=nbx.float64)
    assert D.resolve_out(out, (2, 3), T.float32, out.device, "f") is out  # float32 result casts to float64
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        D.resolve_out(nbx.empty(2, 3, dtype=nbx.int64), (2, 3), T.float32, out.device, "f")
    with pytest.raises(TypeError, match="must be Tensor"):
        D.resolve_out(np.zeros(3), (3,), T.float32, out.device, "f")
    small = nbx.empty(2)
    with pytest.warns(UserWarning, match="resized"):
        D.resolve_out(small, (4, 5), T.float32, small.device, "f")
    assert tuple(small.shape) == (4, 5) and small.is_contiguous()
    empty = nbx.empty(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        D.resolve_out(empty, (3,), T.float32, empty.device, "f")
    e = nbx.ones(1, 3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        D.resolve_out(e, (2, 3), T.float32, e.device, "f")
    ro_arr = np.zeros(3, np.float32)
    ro_arr.flags.writeable = False
    ro = nbx.from_numpy(ro_arr)
    with pytest.raises(RuntimeError, match="read-only"):
        D.resolve_out(ro, (3,), T.float32, ro.device, "f")


def test_check_inplace_and_overlap():
    x = nbx.ones(2, 3)
    assert D.check_inplace(x, (2, 3), T.float32, "add_") is x
    with pytest.raises(RuntimeError, match=r"output with shape \[2, 3\] doesn't match the broadcast shape \[4, 2, 3\]"):
        D.check_inplace(x, (4, 2, 3), T.float32, "add_")
    with pytest.raises(RuntimeError, match="can't be cast"):
        D.check_inplace(nbx.ones(3, dtype=nbx.int32), (3,), T.float32, "add_")
    D.check_no_partial_overlap(x, x, "f")  # identical: fine
    D.check_no_partial_overlap(x, nbx.ones(2, 3), "f")  # different storage
    D.check_no_partial_overlap(x[0], x[1], "f")  # disjoint ranges of one storage
    with pytest.raises(RuntimeError, match="single memory location"):
        D.check_no_partial_overlap(x, x.view(3, 2).t(), "f")  # same memory, other strides
    with pytest.raises(RuntimeError, match="single memory location"):
        D.check_no_partial_overlap(x[:, 1:], x[:, :2], "f")


def test_check_dtype():
    D.check_dtype(None, T.float32, "f")
    D.check_dtype(frozenset({T.float32}), T.float32, "f")
    with pytest.raises(NotImplementedError, match=r"f: not implemented for 'Long' \(int64\)"):
        D.check_dtype(frozenset({T.float32}), T.int64, "f")


def test_common_device_and_operands():
    x = nbx.tensor([1.0])
    dev, ops = D.common_device("f", [x, 2, nbx.tensor(3.0)])
    assert dev == nbx.device("cpu") and ops[1] == 2 and isinstance(ops[2], nbx.Tensor)
    with pytest.raises(RuntimeError, match="at least one tensor"):
        D.common_device("f", [1, 2])


@pytest.fixture
def test_record():
    """A record with a custom driver, installed under names no other test uses; removed afterwards."""
    seen = []

    def driver(rec, args, *, out=None, inplace=None):
        seen.append((dict(args), out, inplace))
        return inplace if inplace is not None else nbx.tensor([args["alpha"]])

    rec = OpRecord(name="_nbxtest_axpy", family="_dispatch_test", cpu=lambda *a: None, cost=lambda *a: Cost(),
                   oracle_note="test record", extra=dict(
                       schema="_nbxtest_axpy(Tensor input, Tensor|Scalar other, *, Scalar alpha=1, Tensor? out=None)",
                       driver=driver, inplace=True, namespaces=("functional",), aliases=("_nbxtest_alias",),
                       dunders={"__matmul__": "fwd", "__rmatmul__": "rev", "__imatmul__": "inplace"}))
    names = ("_nbxtest_axpy", "_nbxtest_axpy_", "_nbxtest_alias", "_nbxtest_alias_", "__matmul__", "__rmatmul__",
             "__imatmul__")
    saved = {n: nbx.Tensor.__dict__[n] for n in names if n in nbx.Tensor.__dict__}  # the matmul family's @
    register(rec)
    D.install(rec)
    yield rec, seen
    for n in names:
        if n in saved:
            setattr(nbx.Tensor, n, saved[n])
        elif n in nbx.Tensor.__dict__:
            delattr(nbx.Tensor, n)
    D._EXPORTS["functional"].pop("_nbxtest_axpy", None)
    D._EXPORTS["functional"].pop("_nbxtest_alias", None)
    from nbxtensor.ops import registry
    registry._TABLE.pop("_nbxtest_axpy", None)


def test_install_generates_surface(test_record):
    rec, seen = test_record
    x = nbx.tensor([1.0])
    f = D.exports("functional")["_nbxtest_axpy"]
    assert D.exports("functional")["_nbxtest_alias"] is f and nbx.Tensor._nbxtest_axpy is f
    assert f(x, 2, alpha=5).tolist() == [5.0]
    assert seen[-1][0]["other"] == 2 and seen[-1][1] is None and seen[-1][2] is None
    o = nbx.empty(1)
    f(x, 2, out=o)
    assert seen[-1][1] is o
    assert x._nbxtest_axpy_(3) is x and seen[-1][2] is x
    x @ 4  # __matmul__ -> fwd
    assert seen[-1][0]["input"] is x and seen[-1][0]["other"] == 4
    4 @ x  # reflected: the Python number becomes the first operand
    assert seen[-1][0]["input"] == 4 and seen[-1][0]["other"] is x
    y = x
    y @= 2
    assert seen[-1][2] is x
    assert x.__matmul__("s") is NotImplemented
    assert "generated from the op table" in f.__doc__
    with pytest.raises(ValueError, match="no schema"):
        D.install(OpRecord(name="_nbxtest_none", family="t", cpu=None, cost=None, oracle_note="x"))


def test_exports_namespaces():
    assert D.exports("torch")["add"] is nbx.add
    assert D.exports("functional")["relu"] is nbx.nn.functional.relu
    with pytest.raises(ValueError, match="unknown namespace"):
        D.exports("nonexistent")


# ---------------------------------------------------------------------------------------------------------
# Plans of the pointwise pipeline: memoised per signature, never stale
# ---------------------------------------------------------------------------------------------------------
def _plans(name):
    from nbxtensor.ops import registry
    return registry.get(name).extra.get("_plans", {})


def test_a_repeated_signature_takes_its_plan(monkeypatch):
    a, b = nbx.randn(3, 4), nbx.randn(3, 4)
    a + b                                                  # plans (3, 4) float32 + (3, 4) float32
    key = D._plan_key(__import__("nbxtensor.ops.registry", fromlist=["get"]).get("add"),
                      {"input": a, "other": b, "alpha": 1})
    assert key in _plans("add")

    def no_promotion(*a, **k):
        raise AssertionError("the full path ran")

    monkeypatch.setattr(D, "promote", no_promotion)
    monkeypatch.setattr(D, "broadcast_shapes", no_promotion)
    c, d = nbx.randn(3, 4), nbx.randn(3, 4)
    np.testing.assert_array_equal((c + d).numpy(), c.numpy() + d.numpy())


@pytest.mark.parametrize("make", [
    lambda: (nbx.randn(3, 4, dtype=nbx.float64), nbx.randn(3, 4, dtype=nbx.float64)),          # dtype
    lambda: (nbx.randn(2, 3, 4), nbx.randn(3, 4)),                                               # shape (broadcast)
    lambda: (nbx.randn(4, 3).t(), nbx.randn(3, 4)),                                              # strides
    lambda: (nbx.randn(3, 6)[:, 1:5], nbx.randn(5, 3, 4)[2]),                                    # offsets
    lambda: (nbx.randn(3, 4), nbx.randn(4)[1:2]),                                                # stride-0 view
    lambda: (nbx.randn(3, 4), nbx.randn(4, 2)[:, 1]),                                            # strided bcast
    lambda: (nbx.randn(()), nbx.randn(3, 4)),                                                    # 0-dim operand
    lambda: (nbx.randn(3, 4, dtype=nbx.bfloat16), nbx.randn(3, 4)),                              # mixed dtypes
    lambda: (nbx.tensor([[1, 2], [3, 4]], dtype=nbx.int32), 1.5),                                # int tensor + float
    lambda: (nbx.tensor([[1, 2], [3, 4]], dtype=nbx.int32), 2),                                  # int tensor + int
    lambda: (nbx.tensor([[1, 2], [3, 4]], dtype=nbx.int32), True),                               # int tensor + bool
], ids=["dtype", "shape", "strides", "offsets", "stride0", "strided_bcast", "zero_dim", "mixed", "int+float", "int+int",
        "int+bool"])
def test_plans_never_serve_another_signature(make):
    """Every call is checked against NumPy after the other signatures have planned: a different dtype, shape,
    stride, offset, scalar type or operand rank must not reuse a plan."""
    for _ in range(2):                                     # the second round runs from the plans
        for m in (lambda: (nbx.randn(3, 4), nbx.randn(3, 4)), lambda: (nbx.randn(3, 4), nbx.randn(4)), make):
            x, y = m()
            got = x + y
            xa = x.numpy().astype(np.float64) if isinstance(x, nbx.Tensor) else x
            ya = y.numpy().astype(np.float64) if isinstance(y, nbx.Tensor) else y
            want_dtype = nbx.result_type(x, y)
            assert got.dtype is want_dtype and tuple(got.shape) == np.broadcast_shapes(np.shape(xa), np.shape(ya))
            np.testing.assert_allclose(got.numpy().astype(np.float64), np.asarray(xa) + np.asarray(ya), rtol=1e-2)


def test_the_default_dtype_is_part_of_the_plan():
    i = nbx.tensor([1, 2], dtype=nbx.int32)
    assert (i + 1.5).dtype is nbx.float32
    nbx.set_default_dtype(nbx.float64)
    try:
        assert (i + 1.5).dtype is nbx.float64
        assert nbx.sqrt(i).dtype is nbx.float64             # int_to_float follows the default too
    finally:
        nbx.set_default_dtype(nbx.float32)
    assert (i + 1.5).dtype is nbx.float32 and nbx.sqrt(i).dtype is nbx.float32


def test_checks_that_depend_on_values_still_run_with_a_plan():
    a, b = nbx.tensor([1, 2]), nbx.tensor([3, 4])
    nbx.add(a, b, alpha=2)                                 # plans int64 + int64
    with pytest.raises(RuntimeError, match="alpha"):       # prepare refuses a float alpha for integers
        nbx.add(a, b, alpha=2.5)
    x = nbx.tensor([1.0, 2.0])
    x / x                                                  # plans div (its dtypes depend on rounding_mode)
    with pytest.raises(NotImplementedError):
        nbx.div(nbx.tensor([True]), nbx.tensor([True]), rounding_mode="floor")
    assert nbx.div(x, x, rounding_mode="floor").dtype is nbx.float32


def test_operands_on_different_devices_take_the_full_path():
    rec = __import__("nbxtensor.ops.registry", fromlist=["get"]).get("add")
    x = nbx.randn(2)
    assert D._plan_key(rec, {"input": x, "other": np.float32(1), "alpha": 1}) is None   # a NumPy scalar
    assert D._plan_key(rec, {"input": x, "other": 1.0, "alpha": 1})[-2] == "cpu"        # the device type is keyed


def test_scalar_conversions_are_memoised_but_keep_signed_zeros_and_nans():
    assert D.scalar_to(0.5, T.bfloat16) is D.scalar_to(0.5, T.bfloat16)
    assert np.signbit(D.scalar_to(0.0, T.float32)) == 0 and np.signbit(D.scalar_to(-0.0, T.float32)) == 1
    assert np.isnan(D.scalar_to(float("nan"), T.float16))
    assert D.scalar_to(True, T.int8) == 1 and D.scalar_to(1, T.float16) == 1.0
    assert type(D.scalar_to(300, T.uint8)) is np.uint8 and D.scalar_to(300, T.uint8) == 44


def test_bind_still_checks_every_argument():
    s = D.parse_schema("f(Tensor input, Scalar|Tensor other, *, float eps=1e-5, int n=2, Tensor? w=None)")
    x = nbx.tensor([1.0])
    a = s.bind((x, x), {"eps": 1})
    assert a == {"input": x, "other": x, "eps": 1.0, "n": 2, "w": None} and type(a["eps"]) is float
    with pytest.raises(TypeError, match="argument 'n' .* must be int, not float"):
        s.bind((x, x), {"n": 2.0})
    with pytest.raises(TypeError, match="missing required argument 'other'"):
        s.bind((x,), {})
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        s.bind((x, x), {"bogus": 1})
    with pytest.raises(TypeError, match="multiple values for argument 'other'"):
        s.bind((x, x), {"other": x})


# ---------------------------------------------------------------------------------------------------------
# out= of another dtype than the result (issue 4): computed in the result dtype, rounded there, then cast
# (runs on both tiers: NumPy on the cpu device, the Triton kernels under NBX_TRITON_INTERPRET=1)
# ---------------------------------------------------------------------------------------------------------
def _bf16(*v):
    return nbx.tensor(list(v), dtype=nbx.bfloat16)


def test_out_of_a_wider_dtype_receives_the_rounded_result():
    a, b = _bf16(1.75, 1.75, 3.140625), _bf16(1.7578125, 1.3828125, 1.75)
    o = nbx.empty(3)
    nbx.mul(a, b, out=o)
    # the bfloat16 products (PyTorch 2.13: 3.078125, 2.421875, 5.5), not the float32 ones (3.076171875, ...)
    assert o.tolist() == [3.078125, 2.421875, 5.5]
    o64 = nbx.empty(3, dtype=nbx.float64)
    nbx.mul(a, b, out=o64)
    assert o64.tolist() == [3.078125, 2.421875, 5.5]
    h = nbx.tensor([1.0, 0.1, 3.0], dtype=nbx.float16)
    o = nbx.empty(3)
    nbx.div(h, nbx.tensor([3.0, 3.0, 7.0], dtype=nbx.float16), out=o)
    assert o.tolist() == nbx.div(h, nbx.tensor([3.0, 3.0, 7.0], dtype=nbx.float16)).float().tolist()
    assert o.tolist()[0] == float(np.float16(1 / 3))
    # float8 inputs: the float8 product (3.0625 rounds to 3.0 in e4m3fn), widened
    f8 = a.to(nbx.float8_e4m3fn)
    o = nbx.empty(3)
    nbx.mul(f8, f8, out=o)
    assert o.tolist() == (f8 * f8).float().tolist() and o.tolist()[0] == 3.0


def test_out_of_another_16bit_dtype_rounds_twice_like_pytorch():
    # bf16 result cast to a float16 out: f32 -> bf16 -> f16 (PyTorch), not f32 -> f16
    a, b = _bf16(1.75, 2.5, 3.140625), _bf16(1.7578125, 1.00390625 * 1.25, 1.75)
    o = nbx.empty(3, dtype=nbx.float16)
    nbx.mul(a, b, out=o)
    assert o.tolist() == (a * b).to(nbx.float16).tolist()
    assert o.tolist()[0] == 3.078125      # float32 -> float16 directly would give 3.076171875
    # and the other way: float16 result into a bfloat16 out
    h = nbx.tensor([1.0009765625, 3.0], dtype=nbx.float16)
    ob = nbx.empty(2, dtype=nbx.bfloat16)
    nbx.exp(h, out=ob)
    assert ob.tolist() == nbx.exp(h).to(nbx.bfloat16).tolist()


def test_integer_inputs_with_a_float_out():
    i = nbx.tensor([1, 2, 7], dtype=nbx.int32)
    o = nbx.empty(3, dtype=nbx.float64)
    nbx.exp(i, out=o)                      # int_to_float: computed in float32 (the default dtype), then widened
    assert o.tolist() == nbx.exp(i).double().tolist() and all(float(np.float32(v)) == v for v in o.tolist())
    nbx.add(i, i, out=o)                   # int32 result cast exactly
    assert o.tolist() == [2.0, 4.0, 14.0]
    nbx.div(i, 3, out=o)
    assert o.tolist() == [float(np.float32(v / 3)) for v in (1, 2, 7)]
    ob = nbx.empty(3, dtype=nbx.bool)
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Bool"):
        nbx.exp(i, out=ob)


def test_comparisons_and_logical_ops_into_float_outs():
    a = _bf16(1.75, 2.5, -1.0)
    o = nbx.empty(3, dtype=nbx.float16)
    nbx.lt(a, 2.0, out=o)
    assert o.tolist() == [1.0, 0.0, 1.0]
    o = nbx.empty(3, dtype=nbx.int32)
    nbx.logical_and(a, a > 0, out=o)
    assert o.tolist() == [1, 1, 0]


def _records_with_out():
    from nbxtensor.ops import registry
    return [r for r in registry.all_ops() if r.extra.get("kind") == "pointwise" and "out" in r.extra.get("schema", "")
            and r.extra.get("generic_test", True) and r.family in ("elementwise", "activation")]


_QUICK = __import__("os").environ.get("NBX_TEST_QUICK", "0") == "1"
_OUT_OPS = ("mul", "add", "div", "sub", "exp", "sigmoid", "clamp", "addcmul", "hypot", "square", "pow")


@pytest.mark.parametrize("rec", [r for r in _records_with_out() if not _QUICK or r.name in _OUT_OPS],
                         ids=lambda r: r.name)
def test_out_equals_the_new_result_cast(rec):
    """For every op with out=: whenever ``op(..., out=o)`` is accepted, ``o`` holds ``op(...).to(o.dtype)`` bit for
    bit (PyTorch's rule: computed in the result dtype, then cast)."""
    import os
    import sys
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import pointwise_harness as H
    ins = [T.bfloat16, T.float16, T.float8_e4m3fn, T.int32] if _QUICK else \
        [T.bfloat16, T.float16, T.float32, T.float64, T.int32, T.uint8, T.bool_, T.float8_e4m3fn]
    outs = [T.float32, T.float16, T.bfloat16] if _QUICK else [T.bfloat16, T.float16, T.float32, T.float64, T.int64,
                                                               T.bool_]
    names = rec.extra["schema_obj"].operands
    checked = 0
    for dt in ins:
        rng = np.random.default_rng(3)
        args = []
        for k, n in enumerate(names):
            if n in rec.extra.get("scalar_operands", ()):
                args.append(2)
                continue
            args.append(nbx.from_numpy(H.values(rec, H._operand_dtype(rec, k, dt), (3, 5), rng, k)))
        params = H.param_cases(rec)[-1]
        try:
            ref = rec.extra["function"](*args, **params)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            continue
        for od in outs:
            if od is ref.dtype:
                continue
            o = nbx.empty(*ref.shape, dtype=od)
            try:
                rec.extra["function"](*args, **params, out=o)
            except RuntimeError:
                continue
            a, b = o.numpy(), ref.to(od).numpy()
            assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), (rec.name, dt.name, od.name, a, b)
            checked += 1
    assert checked or rec.name in ("isposinf", "isneginf", "signbit", "bitwise_not", "frac", "nan_to_num", "abs",
                                   "neg", "sign", "sgn", "floor", "ceil", "trunc", "round", "where", "lerp"), rec.name


def test_ops_that_write_their_input_dtype_only_refuse_other_outs():
    a = _bf16(1.75, -2.5)
    f32 = nbx.empty(2)
    for fn in (nbx.abs, nbx.neg, nbx.floor, nbx.sign, nbx.frac, lambda x, out: nbx.round(x, decimals=1, out=out),
               lambda x, out: nbx.clamp(x, 0, 2, out=out), lambda x, out: nbx.clamp_min(x, 0, out=out),
               lambda x, out: nbx.lerp(x, x, x, out=out)):
        with pytest.raises(RuntimeError, match="Found dtype Float but expected BFloat16"):
            fn(a, out=f32)
    with pytest.raises(RuntimeError, match="Found dtype Float but expected Long"):
        nbx.bitwise_not(nbx.tensor([1, 2]), out=f32)
    with pytest.raises(RuntimeError, match="isposinf does not support non-boolean outputs.*Float"):
        nbx.isposinf(a, out=f32)
    with pytest.raises(RuntimeError, match="Expected out type to be BFloat16 but got Float"):
        nbx.where(a > 0, a, a, out=f32)
    with pytest.raises(RuntimeError, match="dtype of out: Float should be same as input: BFloat16"):
        nbx.nan_to_num(a, out=f32)
    # the same ops with tensor bounds / a scalar weight cast to out's dtype, rounded in the result dtype first
    lo = _bf16(0.0, 0.0)
    assert nbx.clamp(a, lo, None, out=f32).tolist() == [1.75, 0.0]
    b = _bf16(3.0, 1.0)
    assert nbx.lerp(a, b, 0.3, out=f32).tolist() == nbx.lerp(a, b, 0.3).float().tolist()
    # the cast check comes before the op's dtype check, as ATen's: a float result into an int out
    with pytest.raises(RuntimeError, match="result type BFloat16 can't be cast to the desired output type Int"):
        nbx.bitwise_and(a, a, out=nbx.empty(2, dtype=nbx.int32))
    # same dtypes stay accepted
    assert nbx.abs(a, out=nbx.empty(2, dtype=nbx.bfloat16)).tolist() == [1.75, 2.5]
    assert nbx.isposinf(a, out=nbx.empty(2, dtype=nbx.bool)).tolist() == [False, False]


def test_inplace_on_a_wider_self_rounds_once():
    # self float16 *= bfloat16: the result dtype is float32 (= the compute dtype), rounded once into self
    h = nbx.tensor([1.0009765625, 3.0], dtype=nbx.float16)
    b = _bf16(1.7578125, 1.0)
    exp = (h.float() * b.float()).to(nbx.float16).tolist()
    h.mul_(b)
    assert h.tolist() == exp
