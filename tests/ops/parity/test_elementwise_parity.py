"""Parity with PyTorch (CPU) for every elementwise and activation record, generated from the op table: for each
dtype of the table, PyTorch and nbxtensor either both refuse or both compute the same dtype, shape and values
(random domain values and special values); Python-scalar promotion; operators; error cases as data; casts
between every pair bit for bit (all 16-bit float patterns to and from float32).

Float -> integer conversions of NaN, +-inf and out-of-range values are excluded from the cast comparison:
PyTorch leaves them undefined (C++ UB); nbxtensor documents its rule (dtypes/casting.py).
"""

from __future__ import annotations

import operator
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
import nbxtensor.nn.functional as F  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/ops: the shared harness
import pointwise_harness as H  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning")]

REAL = [d for d in T.DTYPES if not d.is_complex]
RECS = [r for r in registry.all_ops() if r.family in ("elementwise", "activation") and "schema" in r.extra]


def tdt(d):
    return getattr(torch, d.name)


_BITS = {T.bfloat16: (np.int16, "int16"), T.float8_e4m3fn: (np.uint8, "uint8"), T.float8_e5m2: (np.uint8, "uint8")}


def to_torch(x: nbx.Tensor):
    """Bit-exact transfer (NaN payloads and signs included) for the ml_dtypes types NumPy cannot hand to torch."""
    a = np.ascontiguousarray(x.cpu().numpy())
    if x.dtype in _BITS:
        npt, _ = _BITS[x.dtype]
        return torch.from_numpy(a.view(npt).copy()).view(tdt(x.dtype))
    return torch.from_numpy(a)


def from_torch(t) -> np.ndarray:
    d = T.dtype_from(str(t.dtype))
    if d in _BITS:
        _, tname = _BITS[d]
        return t.contiguous().view(getattr(torch, tname)).numpy().view(d.numpy)
    return t.numpy()


def torch_fn(rec):
    ns = rec.extra.get("namespaces", ("torch",))
    if "torch" in ns and hasattr(torch, rec.name):
        return getattr(torch, rec.name)
    return getattr(torch.nn.functional, rec.name)


def _values(rec, dt, rng, k, shape=(4, 5)):
    return H.values(rec, dt, shape, rng, k)


def compare(ours: nbx.Tensor, theirs, what: str, *, rel: float = 1.0):
    theirs_dt = T.dtype_from(str(theirs.dtype))
    assert ours.dtype is theirs_dt, f"{what}: dtype {ours.dtype.name} vs torch {theirs_dt.name}"
    assert tuple(ours.shape) == tuple(theirs.shape), what
    a, b = ours.cpu().numpy(), from_torch(theirs)
    if theirs_dt.kind != T.KIND_FLOAT:
        np.testing.assert_array_equal(a, b, err_msg=what)
        return
    a64, b64 = cast_array(a, theirs_dt, T.float64), cast_array(b, theirs_dt, T.float64)
    tol = nbx.dtypes.tolerance(theirs_dt)
    assert (np.isnan(a64) == np.isnan(b64)).all(), f"{what}: NaN positions differ\n{a64}\n{b64}"
    m = ~np.isnan(a64)
    inf = np.isinf(a64[m]) | np.isinf(b64[m])
    assert (a64[m][inf] == b64[m][inf]).all(), f"{what}: infinities differ"
    np.testing.assert_allclose(a64[m][~inf], b64[m][~inf], rtol=tol.rtol * 2 * rel, atol=tol.atol * 2 * rel,
                               err_msg=what)


def _call_both(rec, nargs, targs, params):
    ours = theirs = None
    err_o = err_t = None
    try:
        theirs = torch_fn(rec)(*targs, **params)
    except Exception as e:  # noqa: BLE001
        err_t = e
    try:
        ours = rec.extra["function"](*nargs, **params)
    except Exception as e:  # noqa: BLE001
        err_o = e
    return ours, theirs, err_o, err_t


GENERIC = [r for r in RECS if r.extra.get("kind") == "pointwise" and r.extra.get("generic_test", True)]


@pytest.mark.parametrize("rec", GENERIC, ids=[r.name for r in GENERIC])
def test_every_dtype_matches_pytorch(rec):
    """Both refuse or both agree, for every dtype of the table and every declared parameter case."""
    rng = np.random.default_rng(11)
    names = rec.extra["schema_obj"].operands
    scalar_ops = rec.extra.get("scalar_operands", ())
    for dt in REAL:
        for params in H.param_cases(rec):
            nargs, targs = [], []
            for k, n in enumerate(names):
                d = H._operand_dtype(rec, k, dt)
                if n in scalar_ops:
                    v = 2 if d is not T.bool_ else True
                    nargs.append(v)
                    targs.append(v)
                    continue
                h = _values(rec, d, rng, k)
                x = nbx.from_numpy(h)
                nargs.append(x)
                targs.append(to_torch(x))
            ours, theirs, eo, et = _call_both(rec, nargs, targs, params)
            what = f"{rec.name}[{dt.name}, {params}]"
            sup = rec.extra.get("parity_superset")
            if et is not None and eo is None and sup is not None and dt in sup["dtypes"]:
                continue  # a declared, documented superset of PyTorch's dtypes
            if et is not None:
                assert eo is not None, f"{what}: PyTorch raises ({type(et).__name__}: {et}) but nbxtensor computes"
                continue
            assert eo is None, f"{what}: nbxtensor raises {type(eo).__name__}: {eo}, PyTorch computes"
            compare(ours, theirs, what, rel=4 if rec.extra.get("tolerance") else 1)


SPECIAL_RECS = [r for r in GENERIC if len(r.extra["schema_obj"].operands) <= 2 and not r.extra.get("scalar_operands")]


@pytest.mark.parametrize("rec", SPECIAL_RECS, ids=[r.name for r in SPECIAL_RECS])
def test_special_values_match_pytorch(rec):
    """+-0, +-inf, NaN, subnormals, and all their pairs, in float32, float16 and bfloat16."""
    for dt in (T.float32, T.float16, T.bfloat16, T.float64):
        if dt not in H.allowed(rec):
            continue
        sv = cast_array(np.array(H.SPECIAL[dt]), T.float64, dt)
        n = len(rec.extra["schema_obj"].operands)
        hosts = [sv] if n == 1 else [np.ascontiguousarray(m) for m in np.meshgrid(sv, sv, indexing="ij")]
        excl = rec.extra.get("parity_exclude")
        if excl is not None:  # inputs where PyTorch's CPU result is an artifact of its kernels (declared, with why)
            keep = ~excl["mask"](*[cast_array(h, dt, T.float64) for h in hosts])
            hosts = [np.ascontiguousarray(h[keep]) for h in hosts]
        for params in H.param_cases(rec):
            if dt not in H.allowed(rec, params):
                continue
            nargs = [nbx.from_numpy(h) for h in hosts]
            ours, theirs, eo, et = _call_both(rec, nargs, [to_torch(x) for x in nargs], params)
            assert (eo is None) == (et is None), (rec.name, eo, et)
            if eo is None:
                compare(ours, theirs, f"{rec.name} specials [{dt.name}, {params}]",
                        rel=4 if rec.extra.get("tolerance") else 1)


SCALAR_RECS = [r for r in GENERIC if len(r.extra["schema_obj"].operands) == 2]


@pytest.mark.parametrize("rec", SCALAR_RECS, ids=[r.name for r in SCALAR_RECS])
def test_python_scalars_match_pytorch(rec):
    """A Python bool, int or float in either position: same result dtype (wrapped-number promotion) and values."""
    rng = np.random.default_rng(2)
    by = {a.name: a for a in rec.extra["schema_obj"].args}
    names = rec.extra["schema_obj"].operands
    for dt in (T.uint8, T.int8, T.int32, T.int64, T.float16, T.bfloat16, T.float32, T.float64, T.bool_):
        for pos in (0, 1):
            if "Scalar" not in by[names[pos]].types:
                continue
            for s in (True, 3, 2.5, -1):
                h = _values(rec, dt, rng, 1 - pos)
                x = nbx.from_numpy(h)
                nargs = [x, s] if pos == 1 else [s, x]
                targs = [to_torch(x), s] if pos == 1 else [s, to_torch(x)]
                ours, theirs, eo, et = _call_both(rec, nargs, targs, H.param_cases(rec)[0])
                what = f"{rec.name}({'T' if pos else repr(s)}, {repr(s) if pos else 'T'}) [{dt.name}]"
                sup = rec.extra.get("parity_superset")
                if et is not None and eo is None and sup is not None and dt in sup["dtypes"]:
                    continue
                if et is not None:
                    assert eo is not None, f"{what}: PyTorch raises {et}"
                    continue
                assert eo is None, f"{what}: nbxtensor raises {eo}"
                compare(ours, theirs, what)


OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow,
       operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift, operator.lt, operator.le,
       operator.eq, operator.ne, operator.ge, operator.gt]


@pytest.mark.parametrize("op", OPS, ids=[o.__name__ for o in OPS])
def test_operators_match_pytorch(op):
    rng = np.random.default_rng(4)
    for dt in (T.int32, T.uint8, T.float32, T.float16, T.bool_):
        a = nbx.from_numpy(cast_array(rng.integers(1, 6, (3, 4)), T.int64, dt))
        b = nbx.from_numpy(cast_array(rng.integers(1, 6, (3, 4)), T.int64, dt))
        for x, y in ((a, b), (a, 2), (3, a), (a, 1.5), (2.0, a), (a, True)):
            tx = to_torch(x) if isinstance(x, nbx.Tensor) else x
            ty = to_torch(y) if isinstance(y, nbx.Tensor) else y
            try:
                theirs = op(tx, ty)
            except Exception:  # noqa: BLE001
                if op is operator.pow and dt is T.bool_:
                    continue  # declared superset (the pow record's parity_superset)
                with pytest.raises(Exception):
                    op(x, y)
                continue
            compare(op(x, y), theirs, f"{op.__name__}({x if not isinstance(x, nbx.Tensor) else dt.name}, "
                                      f"{y if not isinstance(y, nbx.Tensor) else dt.name})")
    for uop in (operator.neg, operator.invert, operator.abs):
        for dt in (T.int8, T.uint8, T.float32, T.bool_):
            a = nbx.from_numpy(cast_array(np.array([-3, 0, 5, -128]), T.int64, dt))
            try:
                theirs = uop(to_torch(a))
            except Exception:  # noqa: BLE001
                with pytest.raises(Exception):
                    uop(a)
                continue
            compare(uop(a), theirs, f"{uop.__name__}[{dt.name}]")


ERRORS = [(r, i, e) for r in RECS for i, e in enumerate(r.extra.get("errors", []))]


@pytest.mark.parametrize("case", ERRORS, ids=[f"{r.name}-{i}" for r, i, _ in ERRORS])
def test_error_cases_raise_in_pytorch_too(case):
    """Each error case of the table makes PyTorch raise the same exception type."""
    rec, _, (build, kwargs, exc, _pattern) = case
    targs = build(torch)
    fn = torch_fn(rec)
    with pytest.raises(exc):
        fn(*targs, **kwargs)
    with pytest.raises(exc):
        rec.extra["function"](*build(nbx), **kwargs)


def _cast_edge_values(dt):
    if dt is T.bool_:
        return np.array([True, False])
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        info = np.iinfo(dt.numpy)
        vals = [v for v in (int(info.min), int(info.max), 0, 1, 127, 128, 255, 256, 2 ** 24 + 1, -1, -129, 65535)
                if info.min <= v <= info.max]
        return np.array(vals, dtype=object).astype(dt.numpy)
    base = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 127.9, -128.6, 448.0, 464.0, 480.0, 500.0, 57344.0, 61440.0,
            65504.0, 65520.0, 1e5, 3e38, 1e-3, 1e-8, 3e-39, 1e-45, np.inf, -np.inf, np.nan]
    return cast_array(np.array(base), T.float64, dt)


PAIRS = [(s, d) for s in REAL for d in REAL if s is not d]


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{s.name}-{d.name}" for s, d in PAIRS])
def test_casts_match_pytorch_bitwise(pair):
    s, d = pair
    v = _cast_edge_values(s)
    x = nbx.from_numpy(v)
    ours = x.to(d).cpu().numpy()
    theirs = from_torch(to_torch(x).to(tdt(d)))
    keep = np.ones(v.shape, bool)
    if s.kind == T.KIND_FLOAT and d.kind in (T.KIND_INT, T.KIND_UINT):
        f = cast_array(v, s, T.float64)
        info = np.iinfo(d.numpy)
        keep = np.isfinite(f) & (f > float(info.min) - 1) & (f < float(info.max) + 1)
    if d.kind == T.KIND_FLOAT:
        on = np.isnan(cast_array(ours, d, T.float64))
        tn = np.isnan(cast_array(theirs, d, T.float64))
        assert (on == tn).all(), (s.name, d.name)
        keep &= ~on
        bits = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[d.itemsize]
        np.testing.assert_array_equal(ours[keep].view(bits), theirs[keep].view(bits), err_msg=f"{s.name}->{d.name}")
    else:
        np.testing.assert_array_equal(ours[keep], theirs[keep], err_msg=f"{s.name}->{d.name}")


@pytest.mark.parametrize("dt", [T.float16, T.bfloat16], ids=["float16", "bfloat16"])
def test_all_16bit_patterns_match_pytorch(dt):
    bits = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    t16 = torch.from_numpy(bits.view(np.int16)).view(tdt(dt))
    ours16 = nbx.from_numpy(bits.view(dt.numpy))
    o32, t32 = ours16.to(nbx.float32).numpy(), t16.float().numpy()
    nan = np.isnan(t32)
    assert (np.isnan(o32) == nan).all()
    np.testing.assert_array_equal(o32[~nan].view(np.uint32), t32[~nan].view(np.uint32))
    # float32 -> 16-bit: the widened patterns and their float32 neighbours (ties and near-ties)
    f = t32[np.isfinite(t32)]
    probes = np.concatenate([f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf)),
                             (f[:-1].astype(np.float64) / 2 + f[1:].astype(np.float64) / 2).astype(np.float32)])
    probes = probes[np.isfinite(probes)]
    ours = nbx.from_numpy(probes).to(dt).numpy().view(np.uint16)
    theirs = torch.from_numpy(probes).to(tdt(dt)).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(ours, theirs)


def test_out_and_inplace_rules_match_pytorch():
    for fn, args in ((lambda m, o: m.add(m.ones(3), 1, out=o), None),
                     (lambda m, o: m.exp(m.ones(3), out=o), None)):
        for od in ("int64", "float64", "float16"):
            tr = nr = None
            try:
                fn(torch, torch.empty(3, dtype=getattr(torch, od)))
            except RuntimeError as e:
                tr = e
            try:
                fn(nbx, nbx.empty(3, dtype=getattr(nbx, od)))
            except RuntimeError as e:
                nr = e
            assert (tr is None) == (nr is None), (od, tr, nr)
    for expr in (lambda m: m.tensor([1]).add_(1.5), lambda m: m.ones(3).add_(m.ones(2, 3)),
                 lambda m: m.tensor([True]).sub_(m.tensor([True]))):
        with pytest.raises(RuntimeError):
            expr(torch)
        with pytest.raises(RuntimeError):
            expr(nbx)
    assert F.relu is nbx.relu
