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


def test_out_slot_optional_tensors_and_fetched_scratch(monkeypatch):
    """``given``: the result is the caller's out= tensor (no allocation); ``None`` caller tensors keep their slot
    positions; a scratch tensor declared with ``get`` is looked up per call (e.g. per-stream counters), one
    without it allocated per call."""
    x, out, ws, locks = _t(8), _t(2), _t(6), _t(4)
    with L.Recording() as r:
        L.scratch(ws)
        got = L.scratch(locks, lambda: fetched.append(_t(4)) or fetched[-1])
        L._TLS.rec.append(("k", (1,), (x, out, ws, locks, 7), {"M": 1}))
    assert got is locks and r.scratch == [ws, locks] and [t for t, _ in r.fetch] == [locks]
    fetched = []
    plan = _plan_given(r, (x, None, out), out, given=2)
    assert plan is not None
    calls = _spy(monkeypatch)
    x2, out2 = _t(8), _t(2)
    assert plan(x2, None, out2) is out2
    ((k, g, a, m),) = calls
    assert a[0] is x2 and a[1] is out2 and a[2]._storage is not ws._storage and a[3] is fetched[-1] and a[4] == 7
    assert len(fetched) == 1 and plan(x2, None, out2) is out2 and len(fetched) == 2   # looked up on every call
    assert _plan_given(r, (x, None, out), _t(2), given=2) is None       # the call returned another tensor
    assert L.make_launch_plan(r, (x, None, out), out, make_tensor) is None  # out= without given: not a new result


def _plan_given(rec, tensors, result, **kw):
    return L.make_launch_plan(rec, tensors, result, make_tensor, **kw)


def test_caller_tensors_on_one_storage():
    """Two caller tensors on one storage at different addresses each get their slot; at one address, no plan."""
    base, y = _t(16), _t(2)
    a, b = base[:8], base[8:]
    r = _rec([("k", (1,), (a, b, y), {})])
    assert _plan(r, (a, b), y) is not None
    assert _plan(_rec([("k", (1,), (a, y), {})]), (a, base), y) is None     # a and base: one address


def test_plans_call_a_spy_in_via(monkeypatch):
    """``via`` (a module namespace): the plan launches through that module's ``launch`` when it is not the
    launcher's own (a test's or a benchmark's spy there sees planned calls), else the launcher's."""
    x, y = _t(8), _t(2)
    ns = {"launch": L.launch}
    plan = L.make_launch_plan(_rec([("k", (1,), (x, y, 3), {"B": 2})]), (x,), y, make_tensor, via=ns)
    seen = []
    ns["launch"] = lambda k, g, *a, **m: seen.append((k, a[2:], m))
    plan(_t(8))
    assert seen == [("k", (3,), {"B": 2})]


def test_unrecorded_hides_launches_from_the_open_recording():
    x = _t(4)
    with L.Recording() as r:
        assert L.unrecorded(lambda v: (L._TLS.__dict__.get("rec"), L.scratch(x), v), 5) == (None, x, 5)
        L.scratch(x)
    assert r.scratch == [x] and L._TLS.__dict__.get("rec") is None
