"""Launching Triton kernels on CUDA tensors, without torch: validation, a compiled-kernel cache, a fast path.

:func:`launch` is called by :func:`nbxtensor.runtime.launcher.launch` for CUDA tensors. The first launch of a
kernel with a new *specialization* goes through Triton (``JITFunction.run``: binding, specialization,
compilation, launch); the compiled kernel is then cached per device under a key of what Triton specializes on:

- each tensor argument's dtype and whether its address is 16-byte aligned,
- each int argument's class (``== 1``; 32-bit, 64-bit or unsigned 64-bit; divisible by 16 or not),
- the Python type of every other scalar, and the constexpr values and launch options (``meta``).

Later launches with the same key call the compiled kernel's ``run`` directly with raw addresses (the *fast
path*): no binder, no per-pointer ``cuPointerGetAttribute``. The key is never coarser than Triton's own, so
the fast path runs exactly the binary Triton would have chosen (../shared/DESIGN.md: ``kernel[grid]`` about
13 us of host time, the compiled ``run`` about 4.7 us on an H200).

The fast path runs in C when it can (``runtime/_fastlaunch.c``, built at the first launch through Triton by
:mod:`~nbxtensor.runtime.fastlaunch` with Triton's own C build): the same key, the same checks and the same call
of the compiled kernel's launch function, with about 1.3 us less host time per launch (host_proxy.py's null CUDA
tier). What it does not handle exactly as Python does it hands to the Python fast path below, which is also the
fallback when no C compiler is found (:func:`c_fast_path`, ``fastlaunch.status()``, ``NBX_FASTLAUNCH=0``).

Refused with a clear error, before anything is queued: an argument count or keyword that disagrees with the
kernel's signature; a tensor on another device than the launch, or freed; a pointer-like argument (an object
with ``data_ptr()``) that no allocator of this process knows (memory imported through DLPack is registered on
import) or that lies on another device; a grid that CUDA cannot launch.
"""

from __future__ import annotations

import contextlib
import sys

import dataclasses

from .._errors import check
from ..device.cuda import context as C
from ..device.cuda import stream as S
from ..device.cuda.backend import CudaStorage, find_allocation
from .triton_compat import INTERPRET

__all__ = ["launch", "KernelSignature", "signature_of", "validate", "cache_info", "clear_cache", "arg_spec",
           "c_fast_path"]

_MAX_GRID = (2 ** 31 - 1, 65535, 65535)


class KernelSignature:
    """What the launcher needs to know of a ``@triton.jit`` kernel's parameters.

    Attributes:
        name: the kernel's name.
        names: parameter names in order.
        constexpr: names of ``tl.constexpr`` parameters.
        defaults: default values by name.
        options: accepted launch options (``num_warps``, ``num_stages``, ...).
    """

    __slots__ = ("name", "names", "constexpr", "defaults", "options", "index")

    def __init__(self, name: str, names, constexpr, defaults: dict, options):
        self.name = name
        self.names = tuple(names)
        self.constexpr = frozenset(constexpr)
        self.defaults = dict(defaults)
        self.options = frozenset(options)
        self.index = {n: k for k, n in enumerate(self.names)}


_OPTIONS_FALLBACK = ("num_warps", "num_ctas", "num_stages", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                     "launch_pdl", "debug")


def _launch_options() -> tuple[str, ...]:
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
        return tuple(f.name for f in dataclasses.fields(CUDAOptions))
    except Exception:  # a Triton without the NVIDIA backend: the common options
        return _OPTIONS_FALLBACK


_signatures: dict = {}   # id(kernel) -> (kernel, KernelSignature | None); JITFunction.__hash__ is slow


def signature_of(kernel) -> KernelSignature | None:
    """The :class:`KernelSignature` of a ``@triton.jit`` function (None for wrappers such as autotuners, which
    always take Triton's own path)."""
    hit = _signatures.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    sig = None
    if hasattr(kernel, "params") and hasattr(kernel, "arg_names"):
        params = kernel.params
        sig = KernelSignature(getattr(kernel, "__name__", "kernel"), [p.name for p in params],
                              [p.name for p in params if p.is_constexpr],
                              {p.name: p.default for p in params if p.has_default}, _launch_options())
    _signatures[id(kernel)] = (kernel, sig)   # the entry keeps the kernel alive, so its id is never reused
    return sig


def _storage_of(a):
    return getattr(a, "_storage", None)


def validate(sig: KernelSignature | None, dev_index: int, args, meta: dict) -> None:
    """Check a launch before anything is queued (the slow path runs it for every new key).

    Raises:
        TypeError: too many or too few arguments; a keyword that is neither a parameter nor a launch option; a
            parameter given both positionally and by keyword.
        RuntimeError: a tensor on another device or freed; a pointer argument no allocator knows, or on
            another device.
    """
    if sig is not None:
        n, names = len(args), sig.names
        check(n <= len(names), lambda: f"launch: kernel {sig.name} takes {len(names)} arguments ({', '.join(names)}),"
              f" got {n} positional", TypeError)
        for k in meta:
            if k in sig.index:
                check(sig.index[k] >= n, lambda: f"launch: kernel {sig.name}: argument '{k}' given both "
                      "positionally and as a keyword", TypeError)
            else:
                check(k in sig.options, lambda: f"launch: kernel {sig.name} has no parameter or launch option '{k}' "
                      f"(parameters: {', '.join(names)}; options: num_warps, num_stages, num_ctas, ...)", TypeError)
        missing = [p for p in names[n:] if p not in meta and p not in sig.defaults]
        check(not missing, lambda: f"launch: kernel {sig.name} takes {len(names)} arguments ({', '.join(names)}); "
              f"got {n} positional and {sorted(k for k in meta if k in sig.index)} as keywords, missing {missing}",
              TypeError)
    for k, a in enumerate(args):
        what = lambda: f"argument {k}" + (f" ('{sig.names[k]}')" if sig is not None and k < len(sig.names) else "")
        st = _storage_of(a)
        if st is not None:
            check(isinstance(st, CudaStorage) and st.device.index == dev_index,
                  lambda: f"launch: {what()} is a tensor on {st.device}, but the launch is on cuda:{dev_index}")
            check(st.handle is None or not st.handle.freed, lambda: f"launch: {what()} is a tensor whose memory "
                  f"(0x{st.ptr:x}) was already freed: use after free")
        elif hasattr(a, "data_ptr") and not isinstance(a, (int, float, bool)):
            p = int(a.data_ptr())
            if p == 0:
                continue
            b = find_allocation(p)
            check(b is not None, lambda: f"launch: {what()} points to 0x{p:x}, which no allocator of this process "
                  "knows (not nbxtensor memory, not imported through nbx.from_dlpack); import foreign memory with "
                  "nbx.from_dlpack first")
            check(b.device_index == dev_index, lambda: f"launch: {what()} points to memory of cuda:{b.device_index}"
                  f", but the launch is on cuda:{dev_index}")


def arg_spec(a):
    """The cache-key part for one scalar argument, mirroring Triton's specialization of it: for ints, 1 (Triton
    makes it a constant), else the width class (2: 32-bit, 4: 64-bit, 6: unsigned 64-bit) plus 1 when divisible
    by 16; floats -1; other values by type and value."""
    t = type(a)
    if t is int:
        return 1 if a == 1 else (2 if -0x80000000 <= a <= 0x7FFFFFFF else
                                 4 if -0x8000000000000000 <= a <= 0x7FFFFFFFFFFFFFFF else 6) + (not a & 15)
    if t is float:
        return -1
    if t is bool:
        return "b"
    if a is None:
        return "n"
    return (t, a)


class _DevPtr:
    """A pointer argument as Triton's binder wants it: ``data_ptr()`` and a ``dtype`` whose ``str`` ends in a
    name of Triton's table (nbxtensor dtypes print as ``nbx.float16``)."""

    __slots__ = ("ptr", "dtype")

    def __init__(self, ptr: int, dtype):
        self.ptr = ptr
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.ptr


_cache: dict = {}
_MAX_ENTRIES = 8192
_rt = None          # triton.knobs.runtime, bound at the first launch through Triton
_ENTER = _EXIT = None  # its launch hook chains (HookChain): the fast path runs while both are empty
_Tensor = None      # nbxtensor's Tensor class, learnt from the first tensor argument (runtime never imports tensor)
_hits = 0
_stats = {"misses": 0}
_ctx_tls = C._tls
_stream_tls = S._tls
# The C fast path (runtime/_fastlaunch.c through runtime/fastlaunch.py), bound at the first launch through Triton:
# it reads the names above from this module's globals on every launch, computes the key this module computes,
# and on a hit makes the call the Python fast path below makes. None: the Python fast path (no compiler, or off).
_FAST = None
_PYPATH = None      # its answer "take the Python path" (anything it does not handle exactly as Python does)
_c_wanted = True


class _NeverIdle:
    calls = [None]


def cache_info() -> dict:
    """``{"entries": ..., "hits": ..., "misses": ...}`` of the compiled-kernel cache."""
    from . import fastlaunch
    m = fastlaunch._state["module"]
    return {"entries": len(_cache), "hits": _hits + (m.hits() if m is not None else 0), **_stats}


def clear_cache() -> None:
    """Forget every cached compiled kernel (Triton's own caches are kept)."""
    _cache.clear()


def c_fast_path(enabled: bool | None = None) -> bool:
    """Whether cached launches take the C fast path (``runtime/_fastlaunch.c``); the build's outcome is in
    :func:`nbxtensor.runtime.fastlaunch.status`.

    Args:
        enabled: ``True`` builds it now if needed (once per process) and turns it on; ``False`` turns it off (the
            pure-Python fast path: the same keys and the same calls, for comparison and tests); ``None`` only asks.

    Returns:
        True when launches take the C path from now on.
    """
    global _FAST, _PYPATH, _c_wanted
    if enabled is not None:
        _c_wanted = bool(enabled)
        _FAST = None
        _bind_fast()
    return _FAST is not None


def _bind_fast() -> None:
    global _FAST, _PYPATH
    from . import fastlaunch, launcher
    m = fastlaunch.load()
    if m is not None and _c_wanted:
        m.bind(globals())
        _FAST, _PYPATH = m.fast, m.PYTHON_PATH
    # launcher.launch / launch_tail ask the C path first (skipping their own argument walk and this module's
    # frame); never under the interpreter tier, where cuda tensors are refused by launch() below
    launcher._CUDA_FAST = None if INTERPRET else _FAST


def _grid3(grid, sig, call_args, tail):
    if callable(grid):
        names = sig.names if sig is not None else ()
        grid = grid(dict(zip(names, tuple(call_args) + tuple(tail))))
    if isinstance(grid, int):
        grid = (grid,)
    check(isinstance(grid, (tuple, list)) and 1 <= len(grid) <= 3, lambda: f"launch: grid must be 1 to 3 ints, "
          f"got {grid!r}", TypeError)
    g = (int(grid[0]), int(grid[1]) if len(grid) > 1 else 1, int(grid[2]) if len(grid) > 2 else 1)
    for d, (v, m) in enumerate(zip(g, _MAX_GRID)):
        check(0 <= v <= m, lambda: f"launch: grid dimension {d} is {v}; CUDA allows 0..{m}")
    return g


@contextlib.contextmanager
def _torch_kept_out():
    """Keep Triton from importing torch while it binds and compiles a kernel.

    Triton 3.6's native argument specializer imports ``torch`` (to recognise ``torch.Tensor``) whenever torch is
    installed, which would put torch into every nbxtensor process on a machine that has it (seen on the H200:
    the benchmark's import watch caught it under ``kernel.run``). While this block runs, ``import torch`` fails
    unless the caller already imported torch themselves; afterwards the process can import torch as usual. A
    thread importing torch for the first time during this window would see an ImportError.
    """
    if sys.modules.get("torch") is not None:  # the user's own torch: Triton may use it
        yield
        return
    had = "torch" in sys.modules
    sys.modules["torch"] = None
    try:
        yield
    finally:
        if not had and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]


def _slow(kernel, sig, grid, i, args, meta, key):
    """Validate, launch through Triton (compiling if needed), and cache the compiled kernel under ``key``."""
    from . import cuda_driver
    validate(sig, i, args, meta)
    if not callable(grid):
        _grid3(grid, sig, (), ())
    cuda_driver.install()
    from triton import knobs
    global _rt, _ENTER, _EXIT
    if _rt is None:
        _rt = knobs.runtime
        e, x = _rt.launch_enter_hook, _rt.launch_exit_hook
        # Triton 3.6 keeps hooks in HookChain objects; other forms (None, a function) always take Triton's path
        _ENTER = e if hasattr(e, "calls") else _NeverIdle()
        _EXIT = x if hasattr(x, "calls") else _NeverIdle()
        _bind_fast()
    targs = []
    for a in args:
        st = _storage_of(a)
        if st is not None:
            targs.append(_DevPtr(st.ptr + a._offset * a._dtype.itemsize, a._dtype))
        else:
            targs.append(a)
    # PyTorch's CUDA kernels are built without flush-to-zero (nvcc's -ftz=false); Triton builds libdevice with FTZ
    # on unless told otherwise, which flushes float32 subnormals in exp, floor, pow, ... So kernels compile with it
    # off unless the op says otherwise (found by the H200 tier). Done here, at compile time, so the fast path pays
    # nothing for it.
    opts = meta if "enable_reflect_ftz" in meta else {**meta, "enable_reflect_ftz": False}
    with C.DeviceGuard(i), _torch_kept_out():
        if sig is None:  # autotuner / heuristics wrapper: always Triton's path
            kernel[grid](*targs, **opts)
            return
        ck = kernel.run(*targs, grid=grid, warmup=False, **opts)
    _stats["misses"] += 1
    if ck is None or key is None:
        return
    if hasattr(ck, "result"):
        ck = ck.result()
    tail = tuple(meta[p] if p in meta else sig.defaults[p] for p in sig.names[len(args):])
    if len(_cache) >= _MAX_ENTRIES:   # planned tails are keyed by identity: bound what replaced plans leave behind
        _cache.clear()
    run = ck.run
    scratch = bool(getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1))
    if scratch or not hasattr(run, "launch"):
        # Triton's launcher object allocates the scratch per launch (through a per-thread ContextVar hook)
        head = (ck.function, ck.packed_metadata, None, None, None)
        _cache[key] = (run, head, tail, True)
    else:
        # no scratch: call the C launch function directly, with the arguments CudaLauncher.__call__ would add
        head = (ck.function, run.launch_cooperative_grid, run.launch_pdl, None, None, ck.packed_metadata, None, None,
                None)
        _cache[key] = (run.launch, head, tail, False)


def _full(args, planned) -> tuple:
    return tuple(args) + planned.args if planned is not None else args


def launch(kernel, grid, dev, args, meta, planned=None):
    """Launch ``kernel`` over ``grid`` on CUDA device ``dev`` on its current stream (see the module docstring).

    Args:
        kernel: a ``@triton.jit`` function (or a Triton autotuner, which skips the fast path).
        grid: 1 to 3 ints, or a callable of the bound arguments (as Triton).
        dev: the launch device (``cuda:i``), the device of the tensor arguments.
        args: positional arguments: tensors (passed as pointers), Python scalars, other pointer-like objects.
        meta: constexpr values and launch options (``BLOCK=...``, ``num_warps=...``); ``planned.meta`` with a
            planned tail.
        planned: a :class:`~nbxtensor.runtime.launcher.Tail`: trailing arguments passed after ``args``, keyed by
            the tail's identity (its arguments' specialization and keywords are fixed when it is planned).

    Raises:
        TypeError / RuntimeError: see :func:`validate`; a grid CUDA cannot launch.
        nbxtensor.device.cuda.CudaError or Triton's errors: compilation or launch failures.
    """
    # This function is the per-launch host cost: it is written out flat, with no helper calls on the fast path.
    global _hits, _Tensor
    if INTERPRET:
        raise RuntimeError("launch: CUDA tensors cannot run under the interpreter tier (NBX_TRITON_INTERPRET=1 runs "
                           "kernels on CPU tensors); move the tensors to the CPU or unset the variable")
    i = dev.index
    f = _FAST
    if f is not None:   # the C fast path: None when it launched, the key on a miss, _PYPATH for the code below
        r = f(kernel, i, grid, args, planned, meta)
        if r is None:
            return
        if r is not _PYPATH:
            _slow(kernel, signature_of(kernel), grid, i, _full(args, planned), meta, r)
            return
    key = [id(kernel), i]
    call = []
    kadd = key.append
    cadd = call.append
    T = _Tensor
    for a in args:
        t = a.__class__
        if t is T:
            st = a._storage
            dt = a._dtype
            p = st.ptr + a._offset * dt.itemsize
            h = st.handle
            if st.device.index != i or (h is not None and h.state == 3):
                validate(signature_of(kernel), i, _full(args, planned), meta)   # raises, naming the argument
            cadd(p)
            kadd(id(dt) + (not p & 15))      # ids are multiples of 8: one int holds dtype and alignment
        elif t is int:
            cadd(a)
            kadd(1 if a == 1 else (2 if -0x80000000 <= a <= 0x7FFFFFFF else
                                   4 if -0x8000000000000000 <= a <= 0x7FFFFFFFFFFFFFFF else 6) + (not a & 15))
        elif t is float:
            cadd(a)
            kadd(-1)
        elif hasattr(a, "_storage") and hasattr(a, "_dtype"):     # a tensor (first sight of the class)
            _Tensor = t
            return launch(kernel, grid, dev, args, meta, planned)
        elif hasattr(a, "data_ptr") and t is not bool:
            validate(signature_of(kernel), i, _full(args, planned), meta)
            p = int(a.data_ptr())
            call.append(p)
            key.append(str(a.dtype))
            key.append(not p & 15)
        else:
            call.append(a)
            key.append(arg_spec(a))
    if planned is not None:
        kadd(planned)   # identity: the tail's arguments and keywords never change
        call.extend(planned.args)
    elif meta:
        key.append((*meta, *meta.values()))   # names then values: one flat tuple hashes faster than item pairs
    try:
        key = tuple(key)
        entry = _cache.get(key)
    except TypeError:  # an unhashable argument: Triton's path every time
        key, entry = None, None
    if entry is None or _ENTER.calls or _EXIT.calls:   # hooks added (HookChain.add) by a profiler: Triton's path
        _slow(kernel, signature_of(kernel), grid, i, _full(args, planned), meta, key)
        return
    fn, head, tail, scratch = entry
    n = len(grid) if grid.__class__ is tuple else 0
    if n == 1 and 0 <= grid[0] <= 0x7FFFFFFF:
        g0 = grid[0]
        g1 = g2 = 1
    elif n == 2 and 0 <= grid[0] <= 0x7FFFFFFF and 0 <= grid[1] <= 65535:   # (rows, splits): decode, rope, ...
        g0, g1 = grid
        g2 = 1
    else:
        g0, g1, g2 = _grid3(grid, signature_of(kernel), call, tail)
    if _ctx_tls.__dict__.get("ctx", -1) != i:   # (a thread-local's __dict__: no AttributeError raised inside)
        C.ensure_context(i)
    m = _stream_tls.__dict__.get("streams")
    s = m.get(i) if m else None
    stream = 0 if s is None else s.cuda_stream
    if scratch:  # Triton allocates the scratch through a ContextVar hook (set per thread) on the current device
        from triton.runtime import _allocation
        from . import cuda_driver
        if _allocation._allocator.get() is not cuda_driver._scratch_alloc:
            _allocation._allocator.set(cuda_driver._scratch_alloc)
        with C.DeviceGuard(i):
            fn(g0, g1, g2, stream, *head, *call, *tail)
    else:
        fn(g0, g1, g2, stream, *head, *call, *tail)
    _hits += 1
