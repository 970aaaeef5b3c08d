"""The one benchmark harness: timing, inputs, cost -> rates, the peer protocol, CSV, summary and roofline.

Every family's benchmarks go through this module (../shared/STYLE.md, "Benchmarks"). It imports only the
standard library and NumPy (plus ml_dtypes for bfloat16 and float8 host arrays) at module level, so that both
processes can use it: ``bench_ops.py`` (the library's process: nbxtensor, never torch) and ``peer_torch.py``
(the peer's process: torch, never nbxtensor).

Interface
=========

**Shapes file** (``benchmarks/shapes.json``, checked by :func:`validate_shapes`)::

    {"schema": 1,
     "defaults": {"shapes": [[32768, 8192]], "dtypes": ["bfloat16"]},
     "factories": {"cast": {"dtypes": ["float32"]}},          # optional per-factory defaults
     "ops": {"exp":     {"factory": "unary", "domain": "small"},
             "add":     {"factory": "binary", "dtypes": ["bfloat16", "float32"]},
             "sum":     [{"factory": "reduction", "kwargs": {"dim": -1}},
                         {"factory": "reduction", "kwargs": {"dim": 0}, "label": "dim0"}]}}

An op's entry is one case or a list of cases. A case names a **factory** and its parameters; ``shapes`` and
``dtypes`` multiply into rows (``--quick`` keeps the first dtype). Keys: ``factory``, ``shapes``, ``dtypes``,
``domain``, ``args`` (extra positional arguments after the tensors), ``kwargs``, ``call`` (how to call, see
below), ``label``, ``note``, plus factory-specific keys listed in each factory's docstring. Every case must move
a tensor of at least :data:`MIN_TENSOR_BYTES` (256 MiB, the issue's target size) unless it sets
``"small_ok": "<reason>"``.

**Factories** (:data:`FACTORIES`) are small pure functions ``factory(op, shape, dtype, case) -> Call``. A
:class:`Call` holds the input descriptions (:class:`InputSpec`: shape, dtype, value domain, seed: data, so both
processes build bit-identical inputs with :func:`host_array`), the call target, and the arguments with
:class:`TensorRef` / :class:`DTypeRef` placeholders. Adding a family means adding one factory of a few lines.

**Call targets**: ``"fn:<name>"`` tries ``lib.<name>``, ``lib.nn.functional.<name>``, ``lib.linalg.<name>``,
then the method ``<name>`` of the first tensor argument; ``"F:<name>"`` is ``lib.nn.functional.<name>`` only;
``"method:<name>"`` calls ``args[0].<name>(*args[1:], **kwargs)``. The default target is ``"fn:<op>"``. The
same target resolves against nbxtensor in one process and torch in the other (:func:`resolve_call`), because
nbxtensor uses PyTorch's names.

**Cost**: ``bench_ops.py`` asks the op table (``registry.get(op).cost``) for a :class:`Cost`-like object with
``flops``, ``bytes_read``, ``bytes_written`` (see ``bench_ops.declared_cost`` for how arguments are passed);
:func:`rates` turns it and a time into GB/s, TFLOP/s and percent of the card's peaks (:func:`load_peaks`).

**Timing** (:func:`run_benchmark`): one call (compiles), an estimate from 5 flushed runs, warm-up for
``warmup_ms``, then ``n`` runs each preceded by an L2 flush, each bracketed by a pair of timing events;
p20/p50/p80 by linear interpolation (:func:`percentiles`, as ``numpy.percentile`` and Triton's ``do_bench``
quantiles). The clock is duck-typed (:class:`Clock`): CUDA events of nbxtensor in one process,
``torch.cuda.Event`` in the peer, ``time.perf_counter`` for ``--device cpu``.

The flush (``TimingConfig.flush_mode``, :data:`FLUSH_MODES`, built by :func:`flush_sequence` in both processes):

- ``"clean"`` (the default): write a ``flush_bytes`` buffer, then read another ``flush_bytes`` buffer (at least
  2x L2; on a GPU the callers size both >= 4x L2) with a read-only reduction. The write evicts the timed kernel's data;
  the read evicts the write's dirty lines, so they reach HBM before the start event and **a timed kernel pays
  only its own traffic**. With a write alone up to an L2's worth of dirty lines (~50 MB on an H200) is written
  back while the next kernel runs, and a read-bound kernel is charged for it (H200, benchmarks/probe_flush.py,
  p50: bf16 GEMV 1x4096->14336 34.6 -> 31.5 us, sum of 117 MB bf16 41.5 -> 33.3 us, neg of 128 MiB bf16
  69.8 -> 65.3 us, write flush -> clean flush).
- ``"write"``: the write alone, the convention of Triton's ``do_bench`` (it zeroes a 256 MB buffer); kept for
  comparison with numbers measured that way (``--flush write``).

The host clock (:func:`host_clock`) does the same with NumPy buffers (a fill, then a sum for ``"clean"``); CPU
caches are not what it measures, it only keeps the procedure the same.

**Peer protocol**: JSON lines over the peer's stdin/stdout (:func:`encode_message` / :func:`decode_message`).
Requests ``{"cmd": "hello"}``, ``{"cmd": "bench", "id", "op", "call": Call.to_json(), "timing": TimingConfig
fields, "device"}``, ``{"cmd": "quit"}``; replies ``{"id", "ok": true, "times_ms": [...], "flush": <the mode it
used>, ...}`` or ``{"id", "ok": false, "error": "..."}``.

**Results**: :data:`CSV_FIELDS` rows appended to ``results.csv`` (:func:`append_csv`), :func:`summarize` writes
``summary.md`` (geometric mean of ratios, five slowest ops, ops below 0.8x, rows below 85 % of bandwidth),
:func:`plot_roofline` draws ``roofline.png`` (matplotlib when importable, else a small built-in PNG writer).
``ratio`` is ``peer_p50_ms / p50_ms``: above 1 means nbxtensor is faster.
"""

from __future__ import annotations

import csv
import json
import math
import os
import struct
import time
import zlib
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import numpy as np

__all__ = ["MIN_TENSOR_BYTES", "TARGET_RATIO_GEOMEAN", "TARGET_RATIO_MIN", "TARGET_PCT_BW", "DTYPE_NAMES",
           "InputSpec", "TensorRef", "DTypeRef", "Call", "FACTORIES", "TimingConfig", "FLUSH_MODES", "Clock",
           "HostEvent", "flush_sequence", "describe_flush", "host_clock",
           "percentiles", "run_benchmark", "host_array", "load_shapes", "validate_shapes", "expand_cases",
           "resolve_call", "materialize", "encode_args", "decode_args", "encode_message", "decode_message",
           "rates", "load_peaks", "CSV_FIELDS", "append_csv", "read_csv", "geomean", "summarize",
           "plot_roofline", "write_png", "shape_str", "tensor_nbytes"]

MiB = 1 << 20
MIN_TENSOR_BYTES = 256 * MiB          # issue 4: "benchmarks on an H200, tensors >= 256 MiB"
TARGET_RATIO_GEOMEAN = 1.0            # issue 4: geometric mean of ratios >= 1.0x
TARGET_RATIO_MIN = 0.8                # issue 4: no op below 0.8x
TARGET_PCT_BW = 85.0                  # issue 4: >= 85 % of the datasheet bandwidth
DEFAULT_FLUSH_BYTES = 256 * MiB       # well above the H200's L2 (50-60 MB): every timed run starts cold
FLUSH_MODES = ("clean", "write")      # TimingConfig.flush_mode: see "Timing" in the module docstring

# PyTorch's dtype names (the spellings both nbxtensor and torch accept) -> itemsize.
DTYPE_NAMES = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8,
               "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "float16": 2, "bfloat16": 2, "float32": 4,
               "float64": 8}
_FLOAT = {"float8_e4m3fn", "float8_e5m2", "float16", "bfloat16", "float32", "float64"}


def _np_dtype(name: str) -> np.dtype:
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(np.bool_ if name == "bool" else name)


def shape_str(shape: Iterable[int]) -> str:
    """``(32768, 8192)`` -> ``"32768x8192"`` (``"scalar"`` for ``()``)."""
    shape = tuple(shape)
    return "x".join(str(s) for s in shape) if shape else "scalar"


# ---------------------------------------------------------------------------------------------------------------
# Inputs as data
# ---------------------------------------------------------------------------------------------------------------

# Value ranges per domain: (low, high) of a uniform draw for float dtypes, integer range for integer dtypes.
DOMAINS = {
    "normal": ((-3.0, 3.0), (-100, 100)),
    "small": ((-4.0, 4.0), (-8, 8)),         # exp, sinh, cosh: no overflow
    "positive": ((0.1, 10.0), (1, 100)),     # log, sqrt, rsqrt, reciprocal
    "unit": ((-0.99, 0.99), (-1, 1)),        # asin, acos, atanh, erfinv
    "ge1": ((1.01, 10.0), (1, 100)),         # acosh
    "nonzero": ((0.5, 3.0), (1, 50)),        # divisors (sign is random, see host_array)
    "shift": ((0.0, 7.0), (0, 7)),           # shift amounts
    "prob": ((0.0, 1.0), (0, 1)),          # probabilities (bernoulli)
    "bool": ((0, 1), (0, 1)),
}
_PERIOD = (1 << 20) + 7  # inputs repeat with this period: generation costs O(period), bytes stay distinct


@dataclass(frozen=True)
class InputSpec:
    """One input tensor as data: both processes build the same bytes from it (:func:`host_array`).

    Attributes:
        shape: dims.
        dtype: PyTorch's dtype name.
        domain: a key of :data:`DOMAINS`.
        seed: the generator seed.
        fresh: the op writes into it (``out=`` or in-place): never shared through an input cache.
    """

    shape: tuple[int, ...]
    dtype: str
    domain: str = "normal"
    seed: int = 0
    fresh: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * DTYPE_NAMES[self.dtype]

    def to_json(self) -> dict:
        d = asdict(self)
        d["shape"] = list(self.shape)
        return d

    @classmethod
    def from_json(cls, d: dict) -> "InputSpec":
        return cls(tuple(int(s) for s in d["shape"]), d["dtype"], d.get("domain", "normal"), int(d.get("seed", 0)),
                   bool(d.get("fresh", False)))


def host_array(spec: InputSpec) -> np.ndarray:
    """The host array of ``spec``: deterministic values of its domain, C-contiguous, ``spec.dtype``.

    A block of ``min(numel, 2**20 + 7)`` values is drawn (NumPy PCG64 with ``spec.seed``) and repeated: the
    bytes a kernel moves are what matters to a bandwidth benchmark, and this keeps a 512 MiB input to a fraction
    of a second on the host. Bool inputs are a fair coin; ``nonzero`` gets random signs.
    """
    if spec.domain not in DOMAINS:
        raise ValueError(f"host_array: unknown domain {spec.domain!r} (expected one of {sorted(DOMAINS)})")
    if spec.dtype not in DTYPE_NAMES:
        raise ValueError(f"host_array: unknown dtype {spec.dtype!r}")
    n = math.prod(spec.shape)
    m = max(1, min(n, _PERIOD))
    rng = np.random.default_rng(spec.seed)
    (flo, fhi), (ilo, ihi) = DOMAINS[spec.domain]
    if spec.dtype == "bool" or spec.domain == "bool":
        block = rng.integers(0, 2, m).astype(np.bool_)
        if spec.dtype != "bool":
            block = block.astype(_np_dtype(spec.dtype))
    elif spec.dtype in _FLOAT:
        block = rng.uniform(flo, fhi, m).astype(np.float32)
        if spec.domain == "nonzero":
            block *= np.where(rng.integers(0, 2, m) == 1, 1.0, -1.0).astype(np.float32)
        block = block.astype(_np_dtype(spec.dtype))
    else:
        info = np.iinfo(_np_dtype(spec.dtype))
        lo, hi = max(ilo, int(info.min)), min(ihi, int(info.max))
        block = rng.integers(lo, hi + 1, m).astype(_np_dtype(spec.dtype))
        if spec.domain == "nonzero" and info.min < 0:
            block = block * np.where(rng.integers(0, 2, m) == 1, 1, -1).astype(block.dtype)
    return np.resize(block, n).reshape(spec.shape)


@dataclass(frozen=True)
class TensorRef:
    """Placeholder for input tensor ``index`` in a call's arguments."""

    index: int


@dataclass(frozen=True)
class DTypeRef:
    """Placeholder for a dtype (``DTypeRef("float32")`` -> ``nbx.float32`` or ``torch.float32``)."""

    name: str


def encode_args(obj: Any) -> Any:
    """Arguments -> JSON: ``TensorRef`` -> ``{"$t": i}``, ``DTypeRef`` -> ``{"$dtype": name}``, tuples -> lists."""
    if isinstance(obj, TensorRef):
        return {"$t": obj.index}
    if isinstance(obj, DTypeRef):
        return {"$dtype": obj.name}
    if isinstance(obj, (list, tuple)):
        return [encode_args(o) for o in obj]
    if isinstance(obj, dict):
        return {str(k): encode_args(v) for k, v in obj.items()}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"encode_args: cannot encode {type(obj).__name__} {obj!r}")


def decode_args(obj: Any) -> Any:
    """Inverse of :func:`encode_args`."""
    if isinstance(obj, dict):
        if set(obj) == {"$t"}:
            return TensorRef(int(obj["$t"]))
        if set(obj) == {"$dtype"}:
            return DTypeRef(str(obj["$dtype"]))
        return {k: decode_args(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_args(o) for o in obj]
    return obj


@dataclass
class Call:
    """One benchmarked call: inputs as data, a call target, arguments with placeholders.

    Attributes:
        inputs: the input tensors.
        target: ``"fn:<name>"``, ``"F:<name>"`` or ``"method:<name>"`` (see the module docstring).
        args: positional arguments (``TensorRef``/``DTypeRef`` placeholders, JSON values).
        kwargs: keyword arguments, likewise.
        dtype_label: the row's dtype column (``"bfloat16"``, ``"bfloat16->float32"`` for casts).
    """

    inputs: list[InputSpec]
    target: str
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    dtype_label: str = ""

    def to_json(self) -> dict:
        return {"inputs": [s.to_json() for s in self.inputs], "target": self.target,
                "args": encode_args(self.args), "kwargs": encode_args(self.kwargs), "dtype_label": self.dtype_label}

    @classmethod
    def from_json(cls, d: dict) -> "Call":
        return cls([InputSpec.from_json(s) for s in d["inputs"]], d["target"], decode_args(d.get("args", [])),
                   decode_args(d.get("kwargs", {})), d.get("dtype_label", ""))

    def args_str(self) -> str:
        """The non-tensor arguments, for the CSV's ``args`` column: ``[1.5]``, ``{"dim": -1}``, ``["int32"]``."""
        def plain(v):
            v = encode_args(v)
            return v["$dtype"] if isinstance(v, dict) and set(v) == {"$dtype"} else v
        extra = [plain(a) for a in self.args if not isinstance(a, TensorRef)]
        kw = {k: plain(v) for k, v in self.kwargs.items() if not isinstance(v, TensorRef)}
        parts = ([json.dumps(extra)] if extra else []) + ([json.dumps(kw, sort_keys=True)] if kw else [])
        return " ".join(parts)


def materialize(obj: Any, tensors: list, dtype_of: Callable[[str], Any]) -> Any:
    """Replace placeholders in ``obj`` by ``tensors[i]`` and ``dtype_of(name)``."""
    if isinstance(obj, TensorRef):
        return tensors[obj.index]
    if isinstance(obj, DTypeRef):
        return dtype_of(obj.name)
    if isinstance(obj, list):
        return [materialize(o, tensors, dtype_of) for o in obj]
    if isinstance(obj, tuple):
        return tuple(materialize(o, tensors, dtype_of) for o in obj)
    if isinstance(obj, dict):
        return {k: materialize(v, tensors, dtype_of) for k, v in obj.items()}
    return obj


def resolve_call(lib: Any, call: Call, tensors: list) -> Callable[[], Any]:
    """A zero-argument function that runs ``call`` against ``lib`` (the ``nbxtensor`` or ``torch`` module).

    Raises:
        AttributeError: the target names nothing in ``lib``, naming the target.
        ValueError: a malformed target.
    """
    kind, _, name = call.target.partition(":")
    if not name or kind not in ("fn", "F", "method"):
        raise ValueError(f"resolve_call: target {call.target!r}: expected 'fn:<name>', 'F:<name>' or 'method:<name>'")
    args = materialize(list(call.args), tensors, lambda n: getattr(lib, n))
    kwargs = materialize(dict(call.kwargs), tensors, lambda n: getattr(lib, n))
    functional = getattr(getattr(lib, "nn", None), "functional", None)
    fn = None
    if kind == "fn":
        for ns in (lib, functional, getattr(lib, "linalg", None)):
            fn = getattr(ns, name, None) if ns is not None else None
            if fn is not None:
                break
    elif kind == "F":
        fn = getattr(functional, name, None) if functional is not None else None
    if fn is None and kind in ("fn", "method") and args and hasattr(args[0], name):
        method = getattr(args[0], name)
        rest = args[1:]
        return lambda: method(*rest, **kwargs)
    if fn is None:
        raise AttributeError(f"resolve_call: {getattr(lib, '__name__', lib)} has no {call.target!r}")
    return lambda: fn(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# Factories: (op, shape, dtype, case) -> Call. One per family; each a few lines.
# ---------------------------------------------------------------------------------------------------------------

def _target(op: str, case: dict) -> str:
    return case.get("call", f"fn:{op}")


def _pointwise(op: str, shape, dtype: str, case: dict, arity: int) -> Call:
    """``arity`` tensors of ``shape``/``dtype`` (``"inputs"`` overrides each: ``[{"dtype": "bool", "shape": [...],
    "domain": ...}]``), then ``args``/``kwargs``. ``"out": true`` adds a fresh ``out=`` tensor of the first
    input's shape and dtype (or ``"out_dtype"``)."""
    over = case.get("inputs", [{}] * arity)
    if len(over) != arity:
        raise ValueError(f"{op}: 'inputs' has {len(over)} entries, the factory needs {arity}")
    dom = case.get("domain", "normal")
    specs = [InputSpec(tuple(o.get("shape", shape)), o.get("dtype", dtype), o.get("domain", dom), seed=i,
                       fresh=bool(case.get("inplace")) and i == 0)
             for i, o in enumerate(over)]
    args = [TensorRef(i) for i in range(arity)] + list(case.get("args", []))
    kwargs = dict(case.get("kwargs", {}))
    if case.get("out"):
        specs.append(InputSpec(tuple(shape), case.get("out_dtype", dtype), "normal", seed=arity, fresh=True))
        kwargs["out"] = TensorRef(arity)
    return Call(specs, _target(op, case), args, kwargs, dtype)


def unary(op, shape, dtype, case):
    """One input: ``op(x, *args, **kwargs)`` (also activations: ``F.gelu(x, approximate='tanh')``)."""
    return _pointwise(op, shape, dtype, case, 1)


def binary(op, shape, dtype, case):
    """Two inputs of the same shape (``"inputs"`` for a broadcast shape or another dtype)."""
    return _pointwise(op, shape, dtype, case, 2)


def ternary(op, shape, dtype, case):
    """Three inputs (``where``: ``"inputs": [{"dtype": "bool"}, {}, {}]``; ``lerp``, ``addcmul``, ``clamp``)."""
    return _pointwise(op, shape, dtype, case, 3)


def reduction(op, shape, dtype, case):
    """``op(x, *args, **kwargs)``; ``kwargs`` carries ``dim``/``keepdim``/``dtype`` (a dtype as ``{"$dtype":
    "float32"}``)."""
    c = dict(case)
    c["kwargs"] = decode_args(case.get("kwargs", {}))
    return _pointwise(op, shape, dtype, c, 1)


def softmax(op, shape, dtype, case):
    """``op(x, dim)`` with ``dim`` from ``case["dim"]`` (default -1), e.g. 32768x8192 bf16 rows."""
    c = dict(case)
    c["kwargs"] = {"dim": case.get("dim", -1), **decode_args(case.get("kwargs", {}))}
    return _pointwise(op, shape, dtype, c, 1)


def norm(op, shape, dtype, case):
    """Normalization with its parameters built to match ``x``:

    - ``layer_norm``: ``(x, [N], weight[N], bias[N], eps)``; ``rms_norm``: ``(x, [N], weight[N], eps)``
      (N = last dim);
    - ``group_norm``: ``(x, num_groups, weight[C], bias[C], eps)`` (``case["groups"]``, default 32; C = dim 1);
    - ``batch_norm``: ``(x, running_mean[C], running_var[C], weight[C], bias[C], training=False, momentum, eps)``.

    ``"affine": false`` passes no weight and bias. ``"param_dtype"`` sets the parameters' dtype (default: x's).
    """
    kind = case.get("kind", op)
    case = {"call": f"F:{op}", **case}  # torch.batch_norm's positional order differs from F.batch_norm's
    pdt = case.get("param_dtype", dtype)
    eps = case.get("eps", 1e-5)
    affine = case.get("affine", True)
    x = InputSpec(tuple(shape), dtype, case.get("domain", "normal"), seed=0)
    if kind in ("layer_norm", "rms_norm"):
        n = shape[-1]
        specs = [x]
        w = b = None
        if affine:
            specs.append(InputSpec((n,), pdt, "normal", seed=1))
            w = TensorRef(1)
            if kind == "layer_norm":
                specs.append(InputSpec((n,), pdt, "normal", seed=2))
                b = TensorRef(2)
        args = [TensorRef(0), [n], w, b] if kind == "layer_norm" else [TensorRef(0), [n], w]
        return Call(specs, _target(op, case), args, {"eps": eps}, dtype)
    c = shape[1]
    if kind == "group_norm":
        specs = [x] + ([InputSpec((c,), pdt, "normal", 1), InputSpec((c,), pdt, "normal", 2)] if affine else [])
        w, b = (TensorRef(1), TensorRef(2)) if affine else (None, None)
        return Call(specs, _target(op, case), [TensorRef(0), case.get("groups", 32), w, b], {"eps": eps}, dtype)
    if kind == "batch_norm":
        specs = [x, InputSpec((c,), pdt, "normal", 1), InputSpec((c,), pdt, "positive", 2)]
        if affine:
            specs += [InputSpec((c,), pdt, "normal", 3), InputSpec((c,), pdt, "normal", 4)]
        w, b = (TensorRef(3), TensorRef(4)) if affine else (None, None)
        return Call(specs, _target(op, case), [TensorRef(0), TensorRef(1), TensorRef(2), w, b],
                    {"training": False, "momentum": case.get("momentum", 0.1), "eps": eps}, dtype)
    raise ValueError(f"norm factory: unknown kind {kind!r} for op {op!r} (expected layer_norm, rms_norm, group_norm, "
                     "batch_norm; set 'kind')")


def cast(op, shape, dtype, case):
    """``x.to(<case["to"]>)``: ``dtype`` is the source dtype; the row's dtype reads ``"src->dst"``."""
    to = case.get("to")
    if to not in DTYPE_NAMES:
        raise ValueError(f"cast factory: op {op!r} needs 'to' naming a dtype, got {to!r}")
    x = InputSpec(tuple(shape), dtype, case.get("domain", "normal"), seed=0)
    return Call([x], case.get("call", "method:to"), [TensorRef(0), DTypeRef(to)], dict(case.get("kwargs", {})),
                f"{dtype}->{to}")


def copy(op, shape, dtype, case):
    """``dst.copy_(src)``: ``src`` of ``dtype`` (``"src_shape"`` for a broadcast or ``"src_dtype"`` for a
    converting copy); ``dst`` fresh."""
    src_dt = case.get("src_dtype", dtype)
    dst = InputSpec(tuple(shape), dtype, "normal", seed=0, fresh=True)
    src = InputSpec(tuple(case.get("src_shape", shape)), src_dt, case.get("domain", "normal"), seed=1)
    label = dtype if src_dt == dtype else f"{src_dt}->{dtype}"
    return Call([dst, src], case.get("call", f"method:{op}"), [TensorRef(0), TensorRef(1)], {}, label)


def activation(op, shape, dtype, case):
    """``nn.functional.<op>(x, *args, **kwargs)``: :func:`unary` with the functional namespace as target (torch's
    top-level functions of the same name sometimes take other arguments)."""
    return unary(op, shape, dtype, {"call": f"F:{op}", **case})


FACTORIES: dict[str, Callable[[str, tuple, str, dict], Call]] = {
    "unary": unary, "activation": activation, "binary": binary, "ternary": ternary, "reduction": reduction,
    "softmax": softmax, "norm": norm, "cast": cast, "copy": copy,
}

CASE_KEYS = {"factory", "shapes", "dtypes", "domain", "args", "kwargs", "call", "label", "note", "small_ok", "inputs",
             "out", "out_dtype", "inplace", "dim", "kind", "param_dtype", "eps", "affine", "groups", "momentum", "to",
             "src_dtype", "src_shape"}


# ---------------------------------------------------------------------------------------------------------------
# Shapes file
# ---------------------------------------------------------------------------------------------------------------

def load_shapes(path: str) -> dict:
    """Read and validate the shapes file.

    Raises:
        ValueError: the file breaks the schema; the message lists every problem.
    """
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    errors = validate_shapes(doc)
    if errors:
        raise ValueError(f"{path}: {len(errors)} problem(s):\n  " + "\n  ".join(errors))
    return doc


def expand_cases(doc: dict, op: str, quick: bool = False) -> list[tuple[dict, tuple, str, Call]]:
    """Rows of ``op``: ``(case, shape, dtype, call)`` for each case x shape x dtype (first dtype only when
    ``quick``). Case values override the factory's defaults, which override the file's defaults."""
    entry = doc["ops"][op]
    rows = []
    for raw in (entry if isinstance(entry, list) else [entry]):
        case = {**doc.get("defaults", {}), **doc.get("factories", {}).get(raw.get("factory"), {}), **raw}
        dtypes = case["dtypes"][:1] if quick else case["dtypes"]
        for shape in case["shapes"]:
            for dt in dtypes:
                rows.append((case, tuple(shape), dt, FACTORIES[case["factory"]](op, tuple(shape), dt, case)))
    return rows


def validate_shapes(doc: Any) -> list[str]:
    """Problems of a shapes document (empty when valid): schema, known keys and factories, shapes of positive
    ints, known dtypes, calls the factory accepts, and the >= 256 MiB rule (or ``small_ok`` with a reason)."""
    errs: list[str] = []
    if not isinstance(doc, dict):
        return ["the shapes file must be a JSON object"]
    if doc.get("schema") != 1:
        errs.append(f"'schema' must be 1, got {doc.get('schema')!r}")
    unknown = set(doc) - {"schema", "defaults", "factories", "ops", "comment"}
    if unknown:
        errs.append(f"unknown top-level keys {sorted(unknown)}")
    ops = doc.get("ops")
    if not isinstance(ops, dict) or not ops:
        return errs + ["'ops' must be a non-empty object"]
    for fname in doc.get("factories", {}):
        if fname not in FACTORIES:
            errs.append(f"factories: unknown factory {fname!r} (known: {sorted(FACTORIES)})")
    for op, entry in ops.items():
        cases = entry if isinstance(entry, list) else [entry]
        for i, raw in enumerate(cases):
            where = f"ops.{op}[{i}]" if isinstance(entry, list) else f"ops.{op}"
            if not isinstance(raw, dict):
                errs.append(f"{where}: a case must be an object")
                continue
            bad = set(raw) - CASE_KEYS
            if bad:
                errs.append(f"{where}: unknown keys {sorted(bad)}")
            case = {**doc.get("defaults", {}), **doc.get("factories", {}).get(raw.get("factory"), {}), **raw}
            if case.get("factory") not in FACTORIES:
                errs.append(f"{where}: factory {case.get('factory')!r} is not one of {sorted(FACTORIES)}")
                continue
            shapes, dtypes = case.get("shapes"), case.get("dtypes")
            if not (isinstance(shapes, list) and shapes and all(
                    isinstance(s, list) and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in s)
                    for s in shapes)):
                errs.append(f"{where}: 'shapes' must be a non-empty list of lists of positive ints, got {shapes!r}")
                continue
            if not (isinstance(dtypes, list) and dtypes and all(d in DTYPE_NAMES for d in dtypes)):
                errs.append(f"{where}: 'dtypes' must be a non-empty list of {sorted(DTYPE_NAMES)}, got {dtypes!r}")
                continue
            if "domain" in case and case["domain"] not in DOMAINS:
                errs.append(f"{where}: domain {case['domain']!r} is not one of {sorted(DOMAINS)}")
            for shape in shapes:
                for dt in dtypes:
                    try:
                        call = FACTORIES[case["factory"]](op, tuple(shape), dt, case)
                        call.to_json()
                    except Exception as e:  # noqa: BLE001 - report every bad case, not the first
                        errs.append(f"{where}: {shape_str(shape)} {dt}: {type(e).__name__}: {e}")
                        continue
                    big = max(s.nbytes for s in call.inputs)
                    if big < MIN_TENSOR_BYTES and not case.get("small_ok"):
                        errs.append(f"{where}: {shape_str(shape)} {dt}: largest tensor is {big / MiB:.1f} MiB, the "
                                    f"targets need >= {MIN_TENSOR_BYTES // MiB} MiB (or set 'small_ok': '<reason>')")
    return errs


# ---------------------------------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------------------------------

@dataclass
class TimingConfig:
    """How long to warm up and measure. ``--quick`` uses :meth:`quick`.

    Attributes:
        warmup_ms: warm-up time after the first (compiling) call.
        rep_ms: target measured time; the number of runs is ``rep_ms / estimate`` clamped to [min_reps, max_reps].
        min_reps, max_reps: bounds on measured runs.
        flush_bytes: size of the buffer written before every measured run (L2 flush), and for ``"clean"`` of the
            buffer read after it.
        flush_mode: ``"clean"`` (write, then a read-only reduction of another buffer: the flush's dirty lines
            are written back before the start event) or ``"write"`` (the write alone, as Triton's ``do_bench``);
            see the module docstring.

    Raises:
        ValueError: ``flush_mode`` is not one of :data:`FLUSH_MODES`.
    """

    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    min_reps: int = 10
    max_reps: int = 500
    flush_bytes: int = DEFAULT_FLUSH_BYTES
    flush_mode: str = "clean"

    def __post_init__(self):
        _check_flush_mode(self.flush_mode, "TimingConfig")

    @classmethod
    def quick(cls) -> "TimingConfig":
        return cls(warmup_ms=5.0, rep_ms=20.0, min_reps=5, max_reps=50)


def _check_flush_mode(mode: str, where: str) -> None:
    if mode not in FLUSH_MODES:
        raise ValueError(f"{where}: flush_mode must be one of {FLUSH_MODES}, got {mode!r}")


def describe_flush(cfg: "TimingConfig") -> str:
    """One line for a run's metadata: ``"clean (256 MiB write + 256 MiB read-only sum before each run)"``."""
    mib = cfg.flush_bytes / MiB
    size = f"{mib:.0f} MiB" if mib >= 1 else f"{cfg.flush_bytes} B"
    if cfg.flush_mode == "write":
        return f"write ({size} write before each run, as Triton's do_bench)"
    return f"clean ({size} write + {size} read-only sum before each run)"


def flush_sequence(mode: str, write: Callable[[], Any], read: Callable[[], Any]) -> Callable[[], None]:
    """The L2 flush of ``mode`` from a process's two primitives: ``write()`` queues a write of the flush buffer,
    ``read()`` a read-only reduction of another buffer of at least 2x L2 (both asynchronous on the timing stream).

    ``"write"`` -> ``write``; ``"clean"`` -> ``write`` then ``read`` (module docstring, "Timing").

    Raises:
        ValueError: an unknown ``mode``.
    """
    _check_flush_mode(mode, "flush_sequence")
    if mode == "write":
        return write

    def flush() -> None:
        write()
        read()
    return flush


class Clock:
    """What :func:`run_benchmark` needs from a device (duck-typed; subclasses are optional).

    ``event()`` returns an object with ``record()`` and ``elapsed_time(end) -> ms`` (CUDA-event style);
    ``synchronize()`` waits for the device; ``flush()`` writes the L2-flush buffer (asynchronously).
    """

    def event(self):
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        raise NotImplementedError


class HostEvent:
    """A CUDA-event look-alike on the host clock (for ``--device cpu`` and tests)."""

    __slots__ = ("t",)

    def __init__(self, enable_timing: bool = True):
        self.t = None

    def record(self, stream=None) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: "HostEvent") -> float:
        return (end.t - self.t) * 1e3


class EventClock(Clock):
    """A clock from an event constructor, a synchronize function and a flush function."""

    def __init__(self, make_event: Callable[[], Any], synchronize: Callable[[], None], flush: Callable[[], None]):
        self._make_event, self._sync, self._flush = make_event, synchronize, flush

    def event(self):
        return self._make_event()

    def synchronize(self) -> None:
        self._sync()

    def flush(self) -> None:
        self._flush()


def host_clock(flush_bytes: int = 8 * MiB, flush_mode: str = "clean") -> EventClock:
    """A clock for host (CPU) execution: perf_counter events; the flush of ``flush_mode`` (:func:`flush_sequence`)
    with host buffers of ``flush_bytes``: a fill, then for ``"clean"`` a sum of another buffer.

    Raises:
        ValueError: an unknown ``flush_mode``.
    """
    _check_flush_mode(flush_mode, "host_clock")
    buf = np.empty(max(1, flush_bytes), np.uint8)
    rbuf = np.ones(max(1, flush_bytes // 4), np.float32) if flush_mode == "clean" else None
    return EventClock(HostEvent, lambda: None, flush_sequence(flush_mode, lambda: buf.fill(1), lambda: rbuf.sum()))


def _timed_runs(fn: Callable[[], Any], clock: Clock, n: int) -> list[float]:
    starts = [clock.event() for _ in range(n)]
    ends = [clock.event() for _ in range(n)]
    for i in range(n):
        clock.flush()
        starts[i].record()
        fn()
        ends[i].record()
    clock.synchronize()
    return [float(s.elapsed_time(e)) for s, e in zip(starts, ends)]


def run_benchmark(fn: Callable[[], Any], clock: Clock, cfg: TimingConfig | None = None) -> list[float]:
    """Measured times (ms) of ``fn``: see the module docstring. The same procedure runs in both processes."""
    cfg = cfg or TimingConfig()
    fn()                       # compile / first-touch, untimed
    clock.synchronize()
    est = max(float(np.median(_timed_runs(fn, clock, 5))), 1e-4)
    n_warm = max(1, int(cfg.warmup_ms / est))
    for _ in range(n_warm):
        fn()
    clock.synchronize()
    n = int(min(max(cfg.rep_ms / est, cfg.min_reps), cfg.max_reps))
    return _timed_runs(fn, clock, n)


def percentiles(samples: Iterable[float], qs: Iterable[float] = (20, 50, 80)) -> list[float]:
    """Percentiles of ``samples`` by linear interpolation between closest ranks (``numpy.percentile``'s default,
    and ``torch.quantile``'s used by Triton's ``do_bench``).

    Raises:
        ValueError: no samples, or a q outside [0, 100].
    """
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("percentiles: no samples")
    out = []
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentiles: q must be in [0, 100], got {q}")
        pos = (len(xs) - 1) * q / 100.0
        lo = int(math.floor(pos))
        hi = min(lo + 1, len(xs) - 1)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Peer protocol
# ---------------------------------------------------------------------------------------------------------------

def encode_message(msg: dict) -> str:
    """One protocol line (JSON, no newlines inside, ``\\n`` at the end). NaN/inf are allowed (Python's JSON)."""
    return json.dumps(msg, separators=(",", ":")) + "\n"


def decode_message(line: str) -> dict:
    """Parse one protocol line.

    Raises:
        ValueError: not a JSON object.
    """
    msg = json.loads(line)
    if not isinstance(msg, dict):
        raise ValueError(f"decode_message: expected a JSON object, got {type(msg).__name__}")
    return msg


def tensor_nbytes(obj: Any) -> int:
    """Total bytes of the tensors in ``obj`` (a tensor, or nested tuples/lists of them; others count 0)."""
    if isinstance(obj, (tuple, list)):
        return sum(tensor_nbytes(o) for o in obj)
    if hasattr(obj, "numel") and hasattr(obj, "element_size"):
        return int(obj.numel()) * int(obj.element_size())
    return 0


# ---------------------------------------------------------------------------------------------------------------
# Rates and peaks
# ---------------------------------------------------------------------------------------------------------------

def rates(flops: float, bytes_moved: float, ms: float, peak_gbps: float | None = None,
          peak_tflops: float | None = None) -> dict:
    """GB/s (1e9 bytes/s), TFLOP/s (1e12/s) and percent of the given peaks for one launch of ``ms`` milliseconds.

    Raises:
        ValueError: a non-positive time.
    """
    if not ms > 0:
        raise ValueError(f"rates: time must be positive, got {ms} ms")
    s = ms * 1e-3
    gbps = bytes_moved / s / 1e9
    tflops = flops / s / 1e12
    return {"gbps": gbps, "tflops": tflops,
            "pct_peak_bw": 100.0 * gbps / peak_gbps if peak_gbps else None,
            "pct_peak_flops": 100.0 * tflops / peak_tflops if peak_tflops else None}


def _facts_peaks(facts: dict) -> dict:
    """Peaks from a device facts file, accepting a few spellings of the keys."""
    def find(d, names):
        if not isinstance(d, dict):
            return None
        for k, v in d.items():
            if k in names and isinstance(v, (int, float, dict)):
                return v
        for v in d.values():
            r = find(v, names) if isinstance(v, dict) else None
            if r is not None:
                return r
        return None
    out = {}
    bw = find(facts, {"memory_bandwidth_GBps", "peak_memory_bandwidth_GBps", "dram_bandwidth_GBps",
                      "datasheet_bandwidth_GBps"})
    if bw is None:
        tb = find(facts, {"memory_bandwidth_TBps", "peak_memory_bandwidth_TBps", "dram_bandwidth_TBps",
                          "datasheet_bandwidth_TBps"})
        bw = tb * 1000 if isinstance(tb, (int, float)) else None
    if isinstance(bw, (int, float)):
        out["memory_bandwidth_GBps"] = float(bw)
    tf = find(facts, {"peak_tflops", "dense_tflops", "tensor_tflops", "matrix_tflops"})
    if isinstance(tf, dict):
        out["tflops"] = {k: float(v) for k, v in tf.items() if isinstance(v, (int, float))}
    return out


def load_peaks(gpu_name: str, arch: str | None, facts_dir: str | None, peaks_path: str) -> dict:
    """The card's peaks: ``{"memory_bandwidth_GBps", "tflops": {dtype: TFLOP/s}, "source"}``.

    The device facts file (``<facts_dir>/<arch>.json``) wins where it gives a value; ``peaks_path``
    (``benchmarks/peaks.json``: entries matched by a substring of the GPU name) fills the rest. Empty dict when
    neither knows the card (rows then show rates without percentages).
    """
    peaks: dict = {}
    sources = []
    try:
        with open(peaks_path, encoding="utf-8") as f:
            table = json.load(f)
        for entry in table.get("gpus", []):
            if entry.get("match", "\0").lower() in (gpu_name or "").lower():
                peaks = {k: v for k, v in entry.items() if k in ("memory_bandwidth_GBps", "tflops")}
                sources.append(f"{os.path.basename(peaks_path)}[{entry['match']}] ({entry.get('source', '')})")
                break
    except (OSError, ValueError):
        pass
    if arch and facts_dir:
        path = os.path.join(facts_dir, f"{arch}.json")
        try:
            with open(path, encoding="utf-8") as f:
                fp = _facts_peaks(json.load(f))
        except (OSError, ValueError):
            fp = {}
        if fp:
            # A facts file describes an architecture; a datasheet figure in it applies to every card of that
            # architecture only where peaks.json has no card-specific entry.
            for k, v in fp.items():
                if k not in peaks:
                    peaks[k] = v
            sources.append(f"device/facts/{arch}.json")
    if peaks:
        peaks["source"] = "; ".join(sources)
    return peaks


def peak_tflops_for(peaks: dict, dtype_label: str) -> float | None:
    """The matrix-unit peak for the row's (first) dtype, else ``default``."""
    tf = peaks.get("tflops") or {}
    dt = dtype_label.split("->")[0]
    v = tf.get(dt, tf.get("default"))
    return float(v) if v else None


# ---------------------------------------------------------------------------------------------------------------
# CSV and summary
# ---------------------------------------------------------------------------------------------------------------

CSV_FIELDS = ["run_id", "op", "family", "label", "dtype", "shape", "args", "status", "p20_ms", "p50_ms", "p80_ms",
              "reps", "bytes", "flops", "cost_source", "gbps", "tflops", "pct_peak_bw", "pct_peak_flops",
              "peer_p20_ms", "peer_p50_ms", "peer_p80_ms", "peer_gbps", "peer_pct_peak_bw", "ratio", "error",
              "peer_error", "note", "gpu", "driver", "commit", "date", "flush"]


def append_csv(path: str, rows: list[dict], fields: list[str] = CSV_FIELDS) -> str:
    """Append ``rows`` to the CSV at ``path`` (header written when the file is new). A file whose header differs
    (an older schema) is renamed ``<path>.<mtime>.old`` first, so columns never shift. Returns ``path``."""
    if os.path.exists(path):
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), None)
        if header != fields:
            os.replace(path, f"{path}.{int(os.path.getmtime(path))}.old")
    new = not os.path.exists(path)
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
        if new:
            w.writeheader()
        for r in rows:
            w.writerow({k: _fmt(r.get(k)) for k in fields})
    return path


def _fmt(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return v


def read_csv(path: str) -> list[dict]:
    """Rows of a results CSV, numbers as floats where they parse."""
    out = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            row = {}
            for k, v in r.items():
                try:
                    row[k] = float(v) if k in _NUMERIC and v != "" else (None if v == "" else v)
                except ValueError:
                    row[k] = v
            out.append(row)
    return out


_NUMERIC = {"p20_ms", "p50_ms", "p80_ms", "reps", "bytes", "flops", "gbps", "tflops", "pct_peak_bw",
            "pct_peak_flops", "peer_p20_ms", "peer_p50_ms", "peer_p80_ms", "peer_gbps", "peer_pct_peak_bw", "ratio"}


def geomean(values: Iterable[float]) -> float | None:
    """Geometric mean of the positive finite values (``None`` when there are none)."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v)) and float(v) > 0]
    if not xs:
        return None
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _r(v, fmt="{:.2f}"):
    return "" if v is None else fmt.format(v)


def _row_name(r: dict, op: bool = True) -> str:
    parts = ([r.get("op", "")] if op else []) + [r.get("dtype", ""), r.get("shape", "")] + \
        ([f"[{r['label']}]"] if r.get("label") else [])
    return " ".join(str(p) for p in parts)


CEILING_LABEL = "read-ceiling"


def read_ceiling(rows: list[dict]) -> Callable[[float], float] | None:
    """The card's single-launch read rate as a function of bytes moved, from the run's ``read-ceiling`` rows (a
    read-only reduction over tensors of several sizes, ``shapes.json``): ``f(bytes) -> % of datasheet
    bandwidth``, the better of nbxtensor's and the peer's rate at each measured size, linearly interpolated in
    ``log(bytes)`` between sizes and held constant past the smallest and largest (its ``smallest`` attribute: the
    smallest measured size). None when the run has no such row.

    Why: a row's percentage of datasheet bandwidth mixes the kernel's quality with what one launch of that size
    can reach at all (launch, ramp-up and tail cost microseconds: H200, 8 MiB read in one launch, 25 %); the
    ceiling measured in the same run with the same timing separates the two."""
    pts: dict[float, float] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("label") != CEILING_LABEL or not r.get("bytes"):
            continue
        best = max(v for v in (r.get("pct_peak_bw"), r.get("peer_pct_peak_bw"), 0.0) if v is not None)
        if best > 0:
            b = float(r["bytes"])
            pts[b] = max(pts.get(b, 0.0), best)
    if not pts:
        return None
    xs = sorted(pts)
    log_xs, ys = np.log(xs), [pts[x] for x in xs]

    def at(nbytes: float) -> float:
        return float(np.interp(math.log(nbytes), log_xs, ys))   # np.interp holds the end values past the ends

    at.smallest = xs[0]
    return at


CEILING_MAX_INTENSITY = 50.0   # flop/byte: rows above it are compute-bound (H200 ridge: 989.5 / 4.8 = 206)


def summarize(rows: list[dict], meta: dict | None = None) -> str:
    """The run's ``summary.md``: headline geometric mean of ratios (per row and per op), the five slowest ops,
    ops below 0.8x, rows below 85 % of datasheet bandwidth, errors, coverage, and the full table."""
    meta = meta or {}
    ok = [r for r in rows if r.get("status") == "ok"]
    rated = [r for r in ok if r.get("ratio")]
    per_op: dict[str, list[float]] = {}
    for r in rated:
        per_op.setdefault(r["op"], []).append(r["ratio"])
    op_ratio = {op: geomean(v) for op, v in per_op.items()}
    g_rows, g_ops = geomean(r["ratio"] for r in rated), geomean(op_ratio.values())
    lines = ["# nbxtensor op benchmarks", ""]
    for k in ("command", "gpu", "driver", "commit", "date", "peer", "peaks", "timing", "flush",
              "torch_in_library_process"):
        if k in meta:
            lines.append(f"- {k.replace('_', ' ')}: {meta[k]}")
    lines += ["", f"Rows: {len(rows)} ({len(ok)} ok, {sum(r.get('status') == 'error' for r in rows)} errors, "
              f"{sum(str(r.get('status', '')).startswith('skipped') for r in rows)} skipped); "
              f"{len(rated)} with a peer ratio (ratio = peer p50 / nbxtensor p50; > 1 means nbxtensor is faster).", ""]
    if g_ops is None:
        lines.append("**Geometric mean of ratios: n/a** (no row has both a time and a peer time)")
    else:
        lines.append(f"**Geometric mean of ratios: {g_ops:.3f}x over {len(op_ratio)} ops** ({g_rows:.3f}x over "
                     f"{len(rated)} rows); target >= {TARGET_RATIO_GEOMEAN:.1f}x: "
                     f"{'met' if g_ops >= TARGET_RATIO_GEOMEAN else 'NOT met'}.")
    lines += ["", "## Five slowest ops (lowest ratio; an op's ratio is the geometric mean over its rows)", ""]
    slow = sorted(op_ratio.items(), key=lambda kv: kv[1])[:5]
    if slow:
        lines += ["| op | ratio | worst row |", "|---|---|---|"]
        for op, g in slow:
            worst = min((r for r in rated if r["op"] == op), key=lambda r: r["ratio"])
            lines.append(f"| {op} | {g:.3f}x | {_row_name(worst, op=False)}: {worst['ratio']:.3f}x |")
    else:
        lines.append("(no rows with a ratio)")
    below = [r for r in rated if r["ratio"] < TARGET_RATIO_MIN]
    lines += ["", f"## Rows below {TARGET_RATIO_MIN}x ({len(below)})", ""]
    lines += [f"- {_row_name(r)}: {r['ratio']:.3f}x "
              f"({_r(r.get('gbps'), '{:.0f}')} GB/s vs peer {_r(r.get('peer_gbps'), '{:.0f}')} GB/s)"
              for r in sorted(below, key=lambda r: r["ratio"])] or ["(none)"]
    bw = [r for r in ok if r.get("pct_peak_bw") is not None]
    low_bw = [r for r in bw if r["pct_peak_bw"] < TARGET_PCT_BW]
    lines += ["", f"## Rows below {TARGET_PCT_BW:.0f} % of datasheet bandwidth ({len(low_bw)} of {len(bw)})", ""]
    ceiling = read_ceiling(rows)

    def _ceil(r):  # the single-launch read ceiling at the row's size, for memory-bound rows in the measured range
        if ceiling is None or not r.get("bytes") or r.get("label") == CEILING_LABEL:
            return ""
        if float(r["bytes"]) < ceiling.smallest / 2 or (r.get("flops") or 0) > CEILING_MAX_INTENSITY * r["bytes"]:
            return ""
        c = ceiling(float(r["bytes"]))
        return f"; read ceiling at this size {c:.1f} %, the row at {100 * r['pct_peak_bw'] / c:.0f} % of it"

    if ceiling is not None:
        lines += ["Read ceiling: the better of nbxtensor's and the peer's read-only pass at the row's size (the "
                  f"`{CEILING_LABEL}` rows, interpolated in log bytes): what one launch of that size reaches.", ""]
    lines += [f"- {_row_name(r)}: {r['pct_peak_bw']:.1f} % "
              f"({r['gbps']:.0f} GB/s; peer {_r(r.get('peer_pct_peak_bw'), '{:.1f}')} %{_ceil(r)})"
              for r in sorted(low_bw, key=lambda r: r["pct_peak_bw"])] or ["(none)"]
    errs = [r for r in rows if r.get("status") == "error" or r.get("peer_error")]
    if errs:
        lines += ["", f"## Errors ({len(errs)})", ""]
        for r in errs:
            if r.get("error"):
                lines.append(f"- {_row_name(r)}: {r['error']}")
            if r.get("peer_error"):
                lines.append(f"- {_row_name(r)} (peer): {r['peer_error']}")
    fallback = sorted({r["op"] for r in ok if r.get("cost_source") not in (None, "", "declared")})
    if fallback:
        lines += ["", "## Rows whose bytes were not declared by the op table (tensor sizes used instead)", "",
                  ", ".join(fallback)]
    for key, title in (("not_benchmarked", "Ops with a Triton implementation but no shapes entry"),
                       ("stale_entries", "Shapes entries with no Triton op in the table"),
                       ("notes", "Notes")):
        if meta.get(key):
            lines += ["", f"## {title}", "", ", ".join(meta[key]) if isinstance(meta[key], list) else str(meta[key])]
    lines += ["", "## All rows", "",
              "| op | label | dtype | shape | p50 ms | GB/s | TFLOP/s | % peak BW | peer p50 ms | peer GB/s | ratio "
              "| status |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| " + " | ".join([
            str(r.get("op", "")), str(r.get("label") or ""), str(r.get("dtype", "")), str(r.get("shape", "")),
            _r(r.get("p50_ms"), "{:.4f}"), _r(r.get("gbps"), "{:.0f}"), _r(r.get("tflops"), "{:.3f}"),
            _r(r.get("pct_peak_bw"), "{:.1f}"), _r(r.get("peer_p50_ms"), "{:.4f}"), _r(r.get("peer_gbps"), "{:.0f}"),
            _r(r.get("ratio"), "{:.3f}"), str(r.get("status", ""))]) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------------------
# Roofline
# ---------------------------------------------------------------------------------------------------------------

def plot_roofline(rows: list[dict], peaks: dict, path: str) -> str:
    """Draw the roofline of the ok rows into ``path`` (PNG): x = arithmetic intensity (flop/byte), y = TFLOP/s,
    log-log, roofs from ``peaks``; nbxtensor's rows as filled points, the peer's as hollow ones. Ops that declare
    no flops sit on a second panel as % of peak bandwidth per row. Returns a one-line message."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("p50_ms") and r.get("bytes")]
    if not ok:
        return "roofline: no ok rows to draw"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # noqa: BLE001 - any import failure means: use the built-in writer
        _roofline_builtin(ok, peaks, path)
        return f"roofline: matplotlib not importable; wrote {path} with the built-in PNG writer"
    bw = peaks.get("memory_bandwidth_GBps")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(16, 7))
    fl = [r for r in ok if r.get("flops")]
    if fl:
        for who, key, mk in (("nbxtensor", "p50_ms", "o"), ("peer", "peer_p50_ms", "x")):
            pts = [(r["flops"] / r["bytes"], r["flops"] / (r[key] * 1e-3) / 1e12) for r in fl if r.get(key)]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=mk, label=who)
        lo = min(r["flops"] / r["bytes"] for r in fl) / 4
        hi = max(r["flops"] / r["bytes"] for r in fl) * 4
        xs = np.logspace(math.log10(lo), math.log10(max(hi, lo * 10)), 100)
        if bw:
            for dt, tf in sorted((peaks.get("tflops") or {}).items()):
                ax.plot(xs, np.minimum(tf, xs * bw / 1e3), lw=0.8, label=f"roof {dt} ({tf:.0f} TFLOP/s)")
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (flop/byte, from cost declarations)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title("roofline (ops declaring flops)")
    ax.legend(fontsize=7)
    labs = [f"{r['op']} {r['dtype']}" for r in ok]
    ours = [100 * (r["bytes"] / (r["p50_ms"] * 1e-3) / 1e9) / bw if bw else r["gbps"] for r in ok]
    peer = [100 * (r["bytes"] / (r["peer_p50_ms"] * 1e-3) / 1e9) / bw if (bw and r.get("peer_p50_ms")) else 0
            for r in ok]
    y = np.arange(len(ok))
    bx.barh(y - 0.2, ours, height=0.4, label="nbxtensor")
    bx.barh(y + 0.2, peer, height=0.4, label="peer (torch)")
    if bw:
        bx.axvline(TARGET_PCT_BW, color="k", ls="--", lw=0.8, label=f"target {TARGET_PCT_BW:.0f} %")
    bx.set_yticks(y)
    bx.set_yticklabels(labs, fontsize=max(3, min(8, int(600 / max(1, len(ok))))))
    bx.set_xlabel("% of datasheet bandwidth" if bw else "GB/s")
    bx.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"roofline: wrote {path}"


# A 3x5 bitmap font (rows top to bottom): enough for axis labels in the built-in PNG writer.
_FONT = {
    "0": "111101101101111", "1": "010110010010111", "2": "111001111100111", "3": "111001111001111",
    "4": "101101111001001", "5": "111100111001111", "6": "111100111101111", "7": "111001001001001",
    "8": "111101111101111", "9": "111101111001111", ".": "000000000000010", "%": "101001010100101",
    "-": "000000111000000", " ": "000000000000000", "/": "001001010100100", "(": "010100100100010",
    ")": "010001001001010", "=": "000111000111000", ",": "000000000010100", ":": "000010000010000",
    "A": "010101111101101", "B": "110101110101110", "C": "011100100100011", "D": "110101101101110",
    "E": "111100110100111", "F": "111100110100100", "G": "011100101101011", "H": "101101111101101",
    "I": "111010010010111", "J": "001001001101010", "K": "101101110101101", "L": "100100100100111",
    "M": "101111111101101", "N": "110101101101101", "O": "010101101101010", "P": "110101110100100",
    "Q": "010101101110011", "R": "110101110101101", "S": "011100010001110", "T": "111010010010010",
    "U": "101101101101111", "V": "101101101101010", "W": "101101111111101", "X": "101101010101101",
    "Y": "101101010010010", "Z": "111001010100111",
}


def write_png(path: str, pixels: np.ndarray) -> None:
    """Write an ``(h, w, 3)`` uint8 RGB array as a PNG (zlib + CRC, the PNG spec's minimal chunks)."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[i].astype(np.uint8).tobytes() for i in range(h))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)


def _text(img, x, y, s, color, scale=2):
    for ch in s.upper():
        bits = _FONT.get(ch, _FONT[" "])
        for k, b in enumerate(bits):
            if b == "1":
                r, c = divmod(k, 3)
                img[y + r * scale:y + (r + 1) * scale, x + c * scale:x + (c + 1) * scale] = color
        x += 4 * scale


def _roofline_builtin(ok: list[dict], peaks: dict, path: str) -> None:
    """Without matplotlib: a log-log roofline (x: flop/byte 1e-3..1e3, y: GB/s-equivalent TFLOP/s) drawn as
    pixels. Points at x = 1e-3 are ops declaring no flops, plotted by bandwidth on the right-hand axis."""
    W, H, L, B = 900, 600, 70, 50
    img = np.full((H, W, 3), 255, np.uint8)
    x0, x1, y0, y1 = -3.0, 3.0, -3.0, 3.5   # log10 ranges: intensity, TFLOP/s
    def px(lx, ly):
        return (int(L + (lx - x0) / (x1 - x0) * (W - L - 20)), int(H - B - (ly - y0) / (y1 - y0) * (H - B - 20)))
    img[20:H - B, L] = 0
    img[H - B, L:W - 20] = 0
    for d in range(int(x0), int(x1) + 1):
        x, _ = px(d, y0)
        img[H - B:H - B + 6, x] = 0
        _text(img, x - 8, H - B + 10, f"{d}", (0, 0, 0))
    for d in range(int(y0), int(y1) + 1):
        _, y = px(x0, d)
        img[y, L - 6:L] = 0
        _text(img, 10, y - 5, f"{d}", (0, 0, 0))
    _text(img, W // 2 - 150, H - 22, "LOG10 ARITHMETIC INTENSITY (FLOP/BYTE)", (0, 0, 0))
    _text(img, L + 10, 4, "LOG10 TFLOP/S.  FILLED: NBXTENSOR  HOLLOW: PEER  RED: ROOF.  NO-FLOP OPS AT X=-3", (0, 0, 0))
    bw = peaks.get("memory_bandwidth_GBps")
    if bw:
        for tf in sorted((peaks.get("tflops") or {}).values())[-1:]:
            for i in range(600):
                lx = x0 + (x1 - x0) * i / 599
                ly = math.log10(min(tf, 10 ** lx * bw / 1e3))
                x, y = px(lx, ly)
                if 20 <= y < H - B:
                    img[y, x] = (200, 0, 0)
    for key, color, hollow in (("p50_ms", (0, 90, 200), False), ("peer_p50_ms", (230, 120, 0), True)):
        for r in ok:
            if not r.get(key):
                continue
            ai = r["flops"] / r["bytes"] if r.get("flops") else 10 ** x0
            tf = max(r.get("flops") or 0, 1) / (r[key] * 1e-3) / 1e12 if r.get("flops") else \
                r["bytes"] / (r[key] * 1e-3) / 1e12 * 10 ** x0
            x, y = px(max(x0, min(x1, math.log10(ai))), max(y0, min(y1, math.log10(max(tf, 1e-9)))))
            if hollow:
                img[max(0, y - 3):y + 4, [max(0, x - 3), min(W - 1, x + 3)]] = color
                img[[max(0, y - 3), min(H - 1, y + 3)], max(0, x - 3):x + 4] = color
            else:
                img[max(0, y - 3):y + 4, max(0, x - 3):x + 4] = color
    write_png(path, img)
