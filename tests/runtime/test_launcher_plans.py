"""The launcher's recorded launch sequences (runtime/launcher.py: Recording, scratch, make_launch_plan, LaunchPlan),
which the reductions' launch plans use. Fake kernels and a spy launcher: no Triton needed."""

from __future__ import annotations

import nbxtensor as nbx
from nbxtensor.runtime import launcher as L
from nbxtensor.tensor.core import make_tensor, new_empty


def _t(*shape):
    return new_empty(shape, nbx.float32, nbx.device("cpu"))


def _plan(rec, tensors, result):
    return L.make_launch_plan(rec, tensors, result, make_tensor)


def _spy(monkeypatch):
    calls = []
    monkeypatch.setattr(L, "launch", lambda kernel, grid, *args, **meta: calls.append((kernel, grid, args, meta)))
    return calls


def _rec(launches, scratch=()):
    r = L.Recording()
    r.launches, r.scratch = list(launches), list(scratch)
    return r


def test_recordings_nest_and_collect_scratch():
    x = _t(4)
    with L.Recording() as outer:
        L._TLS.rec.append(("k0", (1,), (x,), {}))
        with L.Recording() as inner:
            L._TLS.rec.append(("k1", (1,), (x,), {}))
            assert L.scratch(x) is x
        assert [r[0] for r in inner.launches] == ["k1"] and inner.scratch == [x]
    assert [r[0] for r in outer.launches] == ["k0", "k1"] and outer.scratch == [x]
    assert L._TLS.__dict__.get("rec") is None
    assert L.scratch(x) is x   # outside a recording: nothing to note


def test_a_two_launch_plan_replays_with_new_results_and_workspaces(monkeypatch):
    x, y, ws = _t(8), _t(2), _t(3)
    r = _rec([("stage1", (2, 3), (x, x, ws, 8, 1.5), {"S": 1}), ("stage2", (2,), (ws, y, 3), {"S": 2})], [ws])
    plan = _plan(r, (x,), y)
    assert plan is not None and len(plan.steps) == 2
    calls = _spy(monkeypatch)
    x2 = _t(8)
    out = plan(x2)
    (k1, g1, a1, m1), (k2, g2, a2, m2) = calls
    assert (k1, g1, m1, k2, g2, m2) == ("stage1", (2, 3), {"S": 1}, "stage2", (2,), {"S": 2})
    assert a1[0] is x2 and a1[1] is x2 and a1[3:] == (8, 1.5)
    assert a1[2] is a2[0] and a1[2]._storage is not ws._storage     # one new workspace shared by both launches
    assert a2[1] is out and out.shape == y.shape and out._storage is not y._storage and a2[2] == 3


def test_tuple_results_keep_their_type(monkeypatch):
    from nbxtensor.ops.reduction import return_types
    _spy(monkeypatch)
    x, a, b = _t(8), _t(2), _t(2)
    res = return_types.max(a, b)
    plan = _plan(_rec([("k", (1,), (x, a, b), {})]), (x,), res)
    got = plan(_t(8))
    assert type(got) is type(res) and got[0]._storage is not a._storage and got.indices.shape == b.shape
    assert _plan(_rec([("k", (1,), (x, a, b), {})]), (x,), (a, None, b))(_t(8))[1] is None


def test_unreplayable_recordings_make_no_plan():
    x, y, tmp = _t(8), _t(2), _t(8)
    assert _plan(_rec([]), (x,), y) is None                                    # nothing launched
    assert _plan(_rec([("cast", (1,), (x, tmp), {}), ("k", (1,), (tmp, y), {})]), (x,), y) is None
    assert _plan(_rec([("k", (1,), (x, 3, y), {})]), (x,), y) is None        # tensor after a scalar
    assert _plan(_rec([("k", (1,), (x[1:], y), {})]), (x,), y) is None       # another offset
    assert _plan(_rec([("k", (1,), (x, y), {})]), (x,), "not a tensor") is None
    assert _plan(_rec([("k", (1,), (x, x), {})]), (x,), x) is None           # result is the input
