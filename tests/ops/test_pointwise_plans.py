"""Launch plans of the pointwise generator (ops/pointwise.py, ``_PLANS``): a repeated layout reuses its planned
tail of arguments and keywords; anything a plan depends on (dtypes, shapes, strides, device, config state)
misses; addresses (storage offsets) and scalar values stay per-call arguments."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.base import Storage
from nbxtensor.device.base import device as Device
from nbxtensor.dtypes import table as T
from nbxtensor.ops import pointwise as PW
from nbxtensor.runtime import configs
from nbxtensor.runtime.launcher import Tail
from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET, tl
from nbxtensor.tensor.core import Size, make_tensor

pytestmark = pytest.mark.skipif(not HAVE_TRITON, reason="the generator's kernels need Triton")


@PW.jit
def _sum2(x, y, p0, p1, p2):
    return x + y * p0


def _capture(monkeypatch):
    got = []
    monkeypatch.setattr(PW, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, grid, args, meta)))
    return got


def _val(a):
    """A scalar kernel argument's value (under the interpreter tier, scalars travel as typed interpreter tensors)."""
    return a.handle.data[0] if hasattr(a, "handle") else a


def _tail(call):
    """What a launch's plan fixes: everything after the per-call arguments (OUT, 2 operand pointers, 2 x (F, I),
    P0..P2, Q0..Q2 = 13), and the keywords."""
    kernel, grid, args, meta = call
    return kernel, grid, args[13:], meta


def test_a_repeated_layout_reuses_its_plan_and_passes_new_addresses_and_values(monkeypatch):
    got = _capture(monkeypatch)
    a, b, out = nbx.randn(4, 6), nbx.randn(4, 6), nbx.empty(4, 6)
    PW.launch_pointwise(_sum2, out, [a, b], T.float32, [2.0])
    n = len(PW._PLANS)
    base = nbx.randn(40)
    c, d = base[1:25].view(4, 6), base[16:40].view(4, 6)   # same layout, other storage and offsets
    out2 = nbx.empty(4, 6)
    PW.launch_pointwise(_sum2, out2, [c, d], T.float32, [3.0])
    assert len(PW._PLANS) == n
    first, second = got
    assert _tail(first) == _tail(second)
    assert second[2][:3] == (out2, c, d) and _val(second[2][7]) == 3.0 and _val(first[2][7]) == 2.0


@pytest.mark.parametrize("change", ["dtype", "out_dtype", "shape", "strides", "out_strides", "scalar", "compute"])
def test_anything_the_plan_depends_on_misses(monkeypatch, change):
    a, b, out = nbx.randn(4, 6), nbx.randn(4, 6), nbx.empty(4, 6)
    a2, b2, out2, ct = a, b, out, T.float32
    if change == "dtype":
        b2 = nbx.randn(4, 6, dtype=nbx.float16)
    elif change == "out_dtype":
        out2 = nbx.empty(4, 6, dtype=nbx.float64)
    elif change == "shape":
        a2, b2, out2 = nbx.randn(6, 4), nbx.randn(6, 4), nbx.empty(6, 4)
    elif change == "strides":
        b2 = nbx.randn(6, 4).t()
    elif change == "out_strides":
        out2 = nbx.empty(6, 4).t()
    elif change == "scalar":
        b2 = 1.5
    else:
        ct = T.float64
    got = _capture(monkeypatch)
    PW.launch_pointwise(_sum2, out, [a, b], T.float32, [2.0])
    n = len(PW._PLANS)
    PW.launch_pointwise(_sum2, out2, [a2, b2], ct, [2.0])
    assert len(PW._PLANS) == n + 1                         # a new plan, not the first one's
    # and the planned launch equals a launch planned from scratch
    PW._PLANS.clear()
    PW.launch_pointwise(_sum2, out2, [a2, b2], ct, [2.0])
    assert _tail(got[1]) == _tail(got[2])


def test_the_device_and_the_config_state_are_keyed():
    def on(dev):
        st = Storage(dev, 96, 0, None, None)
        return make_tensor(st, Size((4, 6)), (6, 1), 0, T.float32)

    keys = {PW._plan_key(_sum2, on(d), [on(d), on(d)], T.float32, [2.0], 0, "pointwise", None)
            for d in (Device("cpu"), Device("cuda", 0), Device("cuda", 1))}
    assert len(keys) == 3
    x = on(Device("cpu"))
    k = PW._plan_key(_sum2, x, [x, x], T.float32, [2.0], 0, "pointwise", None)
    with configs.override("pointwise", BLOCK=64):
        assert PW._plan_key(_sum2, x, [x, x], T.float32, [2.0], 0, "pointwise", None) != k
    assert PW._plan_key(_sum2, x, [x, x], T.float32, [2.0], 0, "pointwise", None) != k   # a new generation


def test_an_override_reaches_a_planned_launch(monkeypatch):
    got = _capture(monkeypatch)
    a, b, out = nbx.randn(4, 6), nbx.randn(4, 6), nbx.empty(4, 6)
    PW.launch_pointwise(_sum2, out, [a, b], T.float32, [2.0])
    with configs.override("pointwise", BLOCK=64):
        PW.launch_pointwise(_sum2, out, [a, b], T.float32, [2.0])
    PW.launch_pointwise(_sum2, out, [a, b], T.float32, [2.0])
    assert got[1][3]["BLOCK"] == 64 and got[0][3]["BLOCK"] == got[2][3]["BLOCK"] != 64


@pytest.mark.skipif(INTERPRET, reason="compiled-tier argument values (the interpreter wraps scalars)")
def test_operand_args_match_the_kernel_signature():
    """The per-call arguments, then the tail, fill the kernel's runtime parameters exactly (two operands)."""
    a = nbx.randn(3)
    args = PW._operand_args([a, np.float32(2.5)], [1.0, 2.0], True)
    assert args[:2] == [a, None] and args[2:6] == [0.0, 0, 2.5, 0] and args[6:] == [1.0, 2.0, 0.0, 0, 0, 0]
    iargs = PW._operand_args([np.int64(-3), a], [7], False)
    assert iargs[:2] == [None, a] and iargs[2:6] == [0.0, -3, 0.0, 0] and iargs[6:] == [0.0, 0.0, 0.0, 7, 0, 0]
    runtime = [p.name for p in PW._pw2.params if not p.is_constexpr]
    assert runtime[:13] == ["OUT", "X0", "X1", "F0", "I0", "F1", "I1", "P0", "P1", "P2", "Q0", "Q1", "Q2"]


def test_a_tail_holds_its_arguments_and_keywords():
    t = Tail([1, 2], {"BLOCK": 4})
    assert t.args == (1, 2) and t.meta == {"BLOCK": 4} and tl is not None


@pytest.mark.skipif(INTERPRET, reason="compiled-tier argument values (the interpreter wraps scalars)")
def test_cuda_launches_fold_constant_arguments_into_the_tail(monkeypatch):
    """With no scalar operands, a CUDA launch passes only the pointers per call; the folded tail (keyed by the
    parameter values) holds exactly the arguments the unfolded launch passes. Signed zeros are never folded."""
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    calls = []
    monkeypatch.setattr(PW, "launch_tail", lambda kernel, grid, args, tail: calls.append(
        (kernel, grid, tuple(args) + tail.args, tail.meta, tail, len(args))))

    def on_cuda():
        return make_tensor(Storage(Device("cuda", 0), 96, 0x10000, None, None), Size((4, 6)), (6, 1), 0, T.float32)

    a, b, out = on_cuda(), on_cuda(), on_cuda()
    for p in (2.0, 2.0, 2.0, 3.0, -0.0, 1):
        PW.launch_pointwise(_sum2, out, [a, b], T.float32, [p])
    full = [c[2] for c in calls]
    assert full[0] == full[1] == full[2] and full[3] != full[2]
    assert [c[5] for c in calls] == [13, 3, 3, 3, 13, 3]            # pointers only, once folded
    assert calls[1][4] is calls[2][4] and calls[3][4] is not calls[2][4]
    assert full[3][7] == 3.0 and np.signbit(full[4][7]) and full[5][7] == 1.0
    assert all(c[3] == calls[0][3] for c in calls)
    PW._PLANS.clear()
    PW.launch_pointwise(_sum2, out, [a, 1.5], T.float32, [2.0])      # a scalar operand: never folded
    PW.launch_pointwise(_sum2, out, [a, 2.5], T.float32, [2.0])
    assert [c[5] for c in calls[-2:]] == [13, 13] and calls[-1][2][5] == 2.5
