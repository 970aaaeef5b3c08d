"""The one launcher: every Triton kernel of nbxtensor runs through :func:`launch`.

- ``cuda`` tensors: launched on the current stream through the torch-free Triton driver
  (:mod:`nbxtensor.runtime.cuda_driver`, when the CUDA runtime is present).
- ``cpu`` tensors with ``NBX_TRITON_INTERPRET=1``: run by Triton's interpreter on host memory (the
  interpreter tier), each tensor wrapped as a :class:`~nbxtensor.runtime.interpret.HostArg`.

Kernel settings (block sizes, warps, stages) come from launch keys (:mod:`nbxtensor.runtime.configs`), not
from constants in operator code.
"""

from __future__ import annotations

import threading
from operator import itemgetter

from .._errors import check, fail
from .interpret import HostArg
from .triton_compat import INTERPRET, require_triton

__all__ = ["launch", "launch_tail", "Tail", "interpreting", "Recording", "scratch", "unrecorded", "LaunchPlan",
           "make_launch_plan"]

_TLS = threading.local()  # .rec: the launches of the open Recording of this thread (a list), .recording: it


def interpreting() -> bool:
    """True when Triton kernels run under the interpreter on host memory (``NBX_TRITON_INTERPRET=1``)."""
    return INTERPRET


def _is_tensor(a) -> bool:
    return hasattr(a, "untyped_storage") and hasattr(a, "stride") and hasattr(a, "_storage")


def launch(kernel, grid, *args, **meta):
    """Launch ``kernel[grid](*args, **meta)``.

    Args:
        kernel: a ``@jit`` kernel.
        grid: a tuple of up to 3 ints (programs per axis).
        args: tensors (passed as pointers) and scalars, in the kernel's order.
        meta: constexpr values and ``num_warps``/``num_stages``.

    Raises:
        RuntimeError: Triton missing; tensors on different devices; a CPU tensor outside the interpreter tier.
    """
    # The host cost of this function is on every launch: the cuda path is kept to a loop, a compare and a call.
    rec = _TLS.__dict__.get("rec")
    if rec is not None:
        rec.append((kernel, grid, args, meta))
    elif _CUDA_FAST is not None and _CUDA_FAST(kernel, None, grid, args, None, meta) is None:
        return None   # launched by cuda_launch's C fast path (anything else: the code below, as without it)
    for a in args:
        st = getattr(a, "_storage", None)
        if st is not None:
            break
    else:
        fail("launch: a kernel needs at least one tensor argument")
    dev = st.device
    if dev.type == "cuda":
        # cuda_launch refuses tensors on other devices and pointers no allocator knows, and compiles without
        # flush-to-zero (PyTorch's CUDA semantics).
        return (_CUDA_LAUNCH or _cuda_launch()).launch(kernel, grid, dev, args, meta)
    require_triton("launch")
    for t in args:
        if _is_tensor(t):
            check(t.device == dev, lambda: f"launch: tensor arguments on different devices: {dev} and {t.device}")
    check(dev.type == "cpu" and INTERPRET, lambda: f"launch: Triton kernels run on {dev.type} tensors only under the "
          "interpreter tier (NBX_TRITON_INTERPRET=1)")
    host_args = [HostArg.of(a) if _is_tensor(a) else a for a in args]
    meta = {k: v for k, v in meta.items() if k not in ("num_warps", "num_stages", "num_ctas")}
    return kernel[grid](*host_args, **meta)


class Tail:
    """The constant end of a planned launch: trailing positional arguments (ints and floats, no tensors) and the
    keywords (constexprs, launch options), fixed when an op plans a launch.

    :func:`launch_tail` passes them after the per-call arguments. The CUDA fast path keys its compiled-kernel cache
    on the tail object itself (identity) instead of re-deriving the specialization of each trailing argument and
    hashing the keywords on every launch, so a tail must not be changed after its first launch: plan a new one.
    """

    __slots__ = ("args", "meta", "__weakref__")

    def __init__(self, args=(), meta=None):
        self.args = tuple(args)
        self.meta = dict(meta or {})


def launch_tail(kernel, grid, args, tail: Tail):
    """``launch(kernel, grid, *args, *tail.args, **tail.meta)``: the one launcher with a planned constant tail.

    Args:
        kernel: a ``@jit`` kernel.
        grid: a tuple of up to 3 ints.
        args: the per-call leading arguments (tensors and scalars), with at least one tensor.
        tail: the planned trailing arguments and keywords (see :class:`Tail`).

    Raises:
        RuntimeError / TypeError: as :func:`launch`.
    """
    if _CUDA_FAST is not None and _TLS.__dict__.get("rec") is None and \
            _CUDA_FAST(kernel, None, grid, args, tail, tail.meta) is None:
        return None   # launched by cuda_launch's C fast path (anything else: the code below, as without it)
    for a in args:
        st = getattr(a, "_storage", None)
        if st is not None:
            if st.device.type == "cuda":
                rec = _TLS.__dict__.get("rec")
                if rec is not None:
                    rec.append((kernel, grid, tuple(args) + tail.args, tail.meta))
                return (_CUDA_LAUNCH or _cuda_launch()).launch(kernel, grid, st.device, args, tail.meta, tail)
            break
    return launch(kernel, grid, *args, *tail.args, **tail.meta)


_CUDA_LAUNCH = None
# cuda_launch's C fast path (fastlaunch ``fast``), set by cuda_launch while it is on: with no device given it takes
# the first tensor's when that is a cuda tensor and launches a cached kernel, else answers "not done" and the
# launch goes the usual way (to cuda_launch.launch, which asks it again with the device).
_CUDA_FAST = None


def _cuda_launch():
    global _CUDA_LAUNCH
    from . import cuda_launch  # the torch-free CUDA path, imported once
    _CUDA_LAUNCH = cuda_launch
    return cuda_launch


# ---------------------------------------------------------------------------------------------------------
# Recorded launch sequences (launch plans)
# ---------------------------------------------------------------------------------------------------------
class Recording:
    """``with Recording() as r:`` collects every launch made on this thread through :func:`launch` and
    :func:`launch_tail` (``r.launches``: ``(kernel, grid, args, meta)`` in order), the per-call scratch tensors ops
    declare with :func:`scratch` (``r.scratch``) and, of those, the ones a plan looks up per call instead of
    allocating (``r.fetch``: ``(tensor, get)`` pairs). Nested recordings: the outer one sees the inner's launches
    and declarations."""

    __slots__ = ("launches", "scratch", "fetch", "_outer")

    def __init__(self):
        self.launches, self.scratch, self.fetch = [], [], []

    def __enter__(self) -> "Recording":
        d = _TLS.__dict__
        self._outer = (d.get("rec"), d.get("recording"))
        self.launches, self.scratch, self.fetch = [], [], []
        _TLS.rec, _TLS.recording = self.launches, self
        return self

    def __exit__(self, *exc) -> None:
        rec, outer = self._outer
        _TLS.rec, _TLS.recording = rec, outer
        if rec is not None:
            rec.extend(self.launches)
        if outer is not None:
            outer.scratch.extend(self.scratch)
            outer.fetch.extend(self.fetch)


def scratch(t, get=None):
    """Declare ``t`` (a tensor the op has just made) a per-call workspace of the launch sequence being recorded,
    if any: a plan made from the recording allocates a new one (same size, layout and dtype) per call, or, with
    ``get`` (a callable of no arguments returning such a tensor), calls ``get()`` per call instead: a buffer looked
    up per call, e.g. split-K arrival counters kept per (device, stream) by the op. Returns ``t``."""
    r = _TLS.__dict__.get("recording")
    if r is not None:
        r.scratch.append(t)
        if get is not None:
            r.fetch.append((t, get))
    return t


def unrecorded(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with no recording open on this thread: for the launches that make a tensor a plan
    obtains by itself per call (a :func:`scratch` tensor's ``get``, e.g. zeroed split-K counters), which are not
    part of the recorded sequence."""
    d = _TLS.__dict__
    saved = (d.get("rec"), d.get("recording"))
    if saved == (None, None):
        return fn(*args, **kwargs)
    _TLS.rec = _TLS.recording = None
    try:
        return fn(*args, **kwargs)
    finally:
        _TLS.rec, _TLS.recording = saved


class LaunchPlan:
    """A recorded sequence of launches replayed with the caller's tensors in their slots (see
    :func:`make_launch_plan`). ``plan(*tensors)`` (the caller's tensors in the recorded order, ``None`` where
    absent) allocates the per-call tensors (results and scratch), looks up the fetched ones, runs every launch in
    order and returns the results in the recorded structure (a tensor, the caller's ``out`` tensor, or a
    tuple/namedtuple of them). CUDA launches go through :func:`launch_tail` with one :class:`Tail` per step, fixed
    at planning; with ``via`` (a module's namespace) the plan calls that module's ``launch`` instead whenever it
    is not the launcher's own (a spy installed on the module sees planned calls too)."""

    __slots__ = ("steps", "fresh", "fetch", "result", "ret", "backend", "device", "n", "make", "via")

    def __init__(self, steps, fresh, fetch, result, device, n, make, via=None):
        from ..device.base import backend_for
        self.steps, self.fresh, self.fetch, self.result, self.device, self.n = steps, fresh, fetch, result, device, n
        self.ret = result[2] if result[0] == 0 else None   # the env index of a single tensor result
        self.backend = backend_for(device)
        self.make, self.via = make, via

    def __call__(self, *tensors):
        # the per-call host cost of every planned op (a decode step's linears): kept to a few lookups and loops
        fresh, fetch = self.fresh, self.fetch
        if fresh or fetch:
            env = list(tensors)
            alloc, dev, make = self.backend.allocate, self.device, self.make
            for nb, shape, stride, off, dt in fresh:
                env.append(make(alloc(nb, dev), shape, stride, off, dt))
            for get in fetch:
                env.append(get())
        else:
            env = tensors
        via = self.via
        fn = launch if via is None else via["launch"]
        own = fn is _LAUNCH
        for kernel, grid, pick, consts, meta, tail in self.steps:
            if tail is not None and own:
                launch_tail(kernel, grid, pick(env), tail)
            else:
                fn(kernel, grid, *pick(env), *consts, **meta)
        ret = self.ret
        if ret is not None:
            return env[ret]
        kind, cls, idx = self.result
        vals = [None if i is None else env[i] for i in idx]
        return cls(*vals) if kind == 2 else cls(vals)


_LAUNCH = launch  # the launcher's own launch (LaunchPlan: anything else in ``via`` is a spy to call)


def make_launch_plan(rec: Recording, tensors: tuple, result, make, *, given=None, via=None):
    """A :class:`LaunchPlan` of the call recorded in ``rec`` (one or more launches), or ``None`` when it cannot be
    replayed safely: no launch; a caller's tensor that is empty; two of the caller's tensors at one address (a
    slot would be ambiguous); a tensor argument that is not at the address (storage, offset, dtype) of exactly
    one of the caller's ``tensors`` (``None`` entries are absent optional tensors), a result tensor or a declared
    :func:`scratch` tensor; a tensor argument after a scalar; results that are not a tensor or a tuple of
    tensors/``None`` on new storages (or, with ``given``, the caller's tensor ``tensors[given]`` itself: an
    ``out=`` the call wrote and returned; the caller keeps it apart from the other tensors).

    Everything else a launch takes (scalars, constexprs, grid) becomes a constant, so the caller keys plans on all
    that determines them (shapes, strides, dtypes, devices, options, config overrides). ``make(storage, shape,
    stride, offset, dtype)`` builds a tensor (``tensor.core.make_tensor``; the runtime layer sits below tensors).
    ``via``: see :class:`LaunchPlan`."""
    if not rec.launches or any(t is not None and (not _is_tensor(t) or t.numel() == 0) for t in tensors):
        return None
    n = len(tensors)
    addrs = [(id(t._storage), t._offset) for t in tensors if t is not None]
    if len(set(addrs)) != len(addrs):
        return None
    if given is not None:
        if not (0 <= given < n and result is tensors[given]):
            return None
        res = (0, None, [])
    elif _is_tensor(result):
        res = (0, None, [result])
    elif isinstance(result, tuple) and all(r is None or _is_tensor(r) for r in result):
        res = (2 if hasattr(result, "_fields") else 1, type(result), list(result))
    else:
        return None
    outs = [r for r in res[2] if r is not None]
    fetched = {id(t): get for t, get in rec.fetch}
    fresh_ts, fetch_ts = [], []
    for t in outs + list(rec.scratch):
        if t.numel() == 0:
            return None
        group = fetch_ts if id(t) in fetched else fresh_ts
        if not any(f._storage is t._storage for f in fresh_ts + fetch_ts):
            group.append(t)
    own = fresh_ts + fetch_ts   # per-call tensors: each on a storage none of the caller's tensors is on
    if any(t is not None and f._storage is t._storage for f in own for t in tensors):
        return None
    known = list(tensors) + own

    def slot(a):  # the one known tensor at a's address (the caller's addresses are distinct, the others' storages)
        for i, t in enumerate(known):
            if t is not None and t._storage is a._storage and (t._offset == a._offset or i >= n):
                return i if t._offset == a._offset and t._dtype is a._dtype else None
        return None

    steps = []
    for kernel, grid, args, meta in rec.launches:
        slots, consts, lead = [], [], True
        for a in args:
            if _is_tensor(a):
                i = slot(a) if lead else None
                if i is None:
                    return None
                slots.append(i)
            else:
                lead = False
                consts.append(a)
        if not slots:
            return None
        dev = known[slots[0]]._storage.device
        tail = Tail(consts, meta) if dev.type == "cuda" else None
        pick = itemgetter(*slots) if len(slots) > 1 else (lambda env, i=slots[0]: (env[i],))
        steps.append((kernel, grid, pick, tuple(consts), dict(meta), tail))
    fresh = tuple((t._storage.nbytes, t._shape, t._stride, t._offset, t._dtype) for t in fresh_ts)
    fetch = tuple(fetched[id(t)] for t in fetch_ts)
    kind, cls, vals = res
    if given is not None:
        return LaunchPlan(tuple(steps), fresh, fetch, (0, None, given), result.device, n, make, via)
    idx = [None if r is None else n + next(j for j, f in enumerate(fresh_ts) if f._storage is r._storage)
           for r in vals]
    if any(i is not None and vals[k]._offset != known[i]._offset for k, i in enumerate(idx)):
        return None  # a result that is a view at another offset of its storage (not replayed)
    if any(r is not None and (r._shape != known[i]._shape or r._stride != known[i]._stride)
           for r, i in zip(vals, idx)):
        return None
    return LaunchPlan(tuple(steps), fresh, fetch, (kind, cls, idx[0] if kind == 0 else idx), outs[0].device, n,
                      make, via)
