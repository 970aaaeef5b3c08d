"""The benchmark harness (benchmarks/harness.py, bench_ops.py, peer_torch.py): everything that runs without a GPU.

Percentiles, rates from cost declarations, the CSV, the summary's arithmetic, the shapes file's schema, the
input data, the peer protocol, and an end-to-end smoke run of bench_ops.py on the host clock with stand-in ops.
The GPU run itself skips without CUDA.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
import types
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)

import bench_ops  # noqa: E402
import harness as H  # noqa: E402

MiB = 1 << 20


# -- percentiles and means ------------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 10, 101])
def test_percentiles_match_numpy_linear(n):
    xs = np.random.default_rng(n).exponential(1.0, n)
    assert H.percentiles(xs) == pytest.approx(np.percentile(xs, [20, 50, 80]).tolist(), rel=1e-12)


def test_percentiles_known_values():
    assert H.percentiles([4, 1, 3, 2, 5]) == pytest.approx([1.8, 3.0, 4.2])
    assert H.percentiles([7.0]) == [7.0, 7.0, 7.0]


def test_percentiles_errors():
    with pytest.raises(ValueError, match="no samples"):
        H.percentiles([])
    with pytest.raises(ValueError, match="q must be in"):
        H.percentiles([1.0], qs=(101,))


def test_geomean():
    assert H.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert H.geomean([1.0, 0.5, 2.0]) == pytest.approx(1.0)
    # Missing, zero, negative and non-finite ratios do not count (a failed row has no ratio).
    assert H.geomean([None, 0.0, -1.0, float("nan"), float("inf"), 3.0]) == pytest.approx(3.0)
    assert H.geomean([]) is None


# -- rates from cost declarations ------------------------------------------------------------------------------

def test_rates_arithmetic():
    r = H.rates(flops=2e12, bytes_moved=4.8e9, ms=1.0, peak_gbps=4800, peak_tflops=1000)
    assert r["gbps"] == pytest.approx(4800.0)       # 4.8e9 B in 1 ms = 4.8e12 B/s
    assert r["tflops"] == pytest.approx(2000.0)
    assert r["pct_peak_bw"] == pytest.approx(100.0)
    assert r["pct_peak_flops"] == pytest.approx(200.0)
    r = H.rates(0, 512 * MiB * 2, 0.25)
    assert r["gbps"] == pytest.approx(2 * 512 * MiB / 0.25e-3 / 1e9)
    assert r["pct_peak_bw"] is None and r["tflops"] == 0
    with pytest.raises(ValueError, match="positive"):
        H.rates(1, 1, 0.0)


class _FakeTensor:
    def __init__(self, n, itemsize=2, dtype="bfloat16"):
        self.n, self.it, self.dtype = n, itemsize, dtype
        self.shape = (n,)

    def numel(self):
        return self.n

    def element_size(self):
        return self.it


@dataclass
class _Cost:
    flops: int
    bytes_read: int
    bytes_written: int


def _decl(cost, call, tensors, out, args=None, kwargs=None, extra=None):
    rec = types.SimpleNamespace(name="op", cost=cost, extra=extra or {})
    args = args if args is not None else H.materialize(call.args, tensors, str)
    return bench_ops.declared_cost(rec, call, tensors, args, kwargs or {}, out)


def test_declared_cost_by_parameter_name():
    call = H.FACTORIES["binary"]("add", (1 << 20,), "bfloat16", {})
    x, y, out = _FakeTensor(1 << 20), _FakeTensor(1 << 10), _FakeTensor(1 << 20, 4, "float32")

    # The pointwise convention: cost(out_shape, out_dtype, inputs=()).
    def pointwise(out_shape, out_dtype, inputs=()):
        n = out_shape[0]
        return _Cost(n, sum(s[0] * (2 if d == "bfloat16" else 4) for s, d in inputs),
                     n * (4 if out_dtype == "float32" else 2))
    assert _decl(pointwise, call, [x, y], out) == (1 << 20, 2 * (1 << 20) + 2 * (1 << 10) + 4 * (1 << 20),
                                                   "declared")

    # The copy_ convention: cost(dst_shape, dst_dtype, src_numel, src_dtype); dst is the fresh input.
    cp = H.FACTORIES["copy"]("copy_", (1 << 20,), "bfloat16", {"src_dtype": "float32"})
    dst, src = _FakeTensor(1 << 20), _FakeTensor(1 << 20, 4, "float32")

    def copy_cost(dst_shape, dst_dtype, src_numel, src_dtype):
        assert dst_dtype == "bfloat16" and src_dtype == "float32"
        return _Cost(0, src_numel * 4, dst_shape[0] * 2)
    assert _decl(copy_cost, cp, [dst, src], dst) == (0, 6 << 20, "declared")

    # fill_: cost(shape, dtype) of the first tensor argument.
    fl = H.FACTORIES["unary"]("fill_", (1 << 20,), "bfloat16", {"inplace": True, "call": "method:fill_",
                                                               "args": [1.5]})
    assert _decl(lambda shape, dtype: _Cost(0, 0, shape[0] * 2), fl, [dst], dst)[:2] == (0, 2 << 20)
    # A dict is accepted too; and arguments the schema names (here a fake schema-less record: positional).
    assert _decl(lambda t, u: {"flops": 0, "bytes_read": 10, "bytes_written": 6}, call, [x, y], out)[:2] == (0, 16)


def test_declared_cost_falls_back_to_tensor_sizes_and_says_so():
    call = H.FACTORIES["unary"]("neg", (1 << 20,), "bfloat16", {})
    x, out = _FakeTensor(1 << 20), _FakeTensor(1 << 20)
    flops, nbytes, source = _decl(lambda a, b, c, d: _Cost(0, 0, 0), call, [x], out)
    assert (flops, nbytes) == (0, 4 << 20) and source.startswith("io-fallback")
    flops, nbytes, source = _decl(lambda *a: None, call, [x], out)
    assert source == "io-fallback (cost returned no bytes)"


def test_io_bytes_counts_shared_inputs_once_and_fresh_outputs():
    call = H.FACTORIES["binary"]("add", (1024, 1024), "float32", {})
    x = _FakeTensor(1 << 20, 4)
    # add(x, x): the same tensor read once. (Both specs differ, but the tensors are one object.)
    assert bench_ops.io_bytes(call, [x, x], _FakeTensor(1 << 20, 4)) == (4 << 20, 4 << 20)
    copy = H.FACTORIES["copy"]("copy_", (1024, 1024), "float32", {})
    assert bench_ops.io_bytes(copy, [_FakeTensor(1 << 20, 4), _FakeTensor(1 << 20, 4)], None) == (4 << 20, 4 << 20)


# -- CSV ------------------------------------------------------------------------------------------------------

def _row(op, ratio=None, status="ok", **kw):
    r = {"op": op, "dtype": "bfloat16", "shape": "32768x8192", "status": status, "p50_ms": 0.3, "ratio": ratio,
         "bytes": 1 << 30, "gbps": 3500.0, "pct_peak_bw": 72.9, "flops": 0}
    r.update(kw)
    return r


def test_append_csv_header_once_and_roundtrip(tmp_path):
    path = str(tmp_path / "results.csv")
    H.append_csv(path, [_row("add", 1.1)])
    H.append_csv(path, [_row("mul", 0.9), _row("exp", None, status="error", error="RuntimeError: boom, badly")])
    lines = open(path).read().splitlines()
    assert lines[0] == ",".join(H.CSV_FIELDS)
    assert sum(line.startswith("run_id") for line in lines) == 1
    rows = H.read_csv(path)
    assert [r["op"] for r in rows] == ["add", "mul", "exp"]
    assert rows[0]["ratio"] == pytest.approx(1.1) and rows[2]["ratio"] is None
    assert rows[2]["error"] == "RuntimeError: boom, badly"


def test_append_csv_moves_a_file_with_another_header_aside(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("op,p50\nadd,1\n")
    H.append_csv(str(path), [_row("add", 1.0)])
    assert open(path).readline().strip() == ",".join(H.CSV_FIELDS)
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".old")]


# -- summary --------------------------------------------------------------------------------------------------

def test_summary_geomean_slowest_and_below_target():
    rows = [_row("a", 2.0), _row("a", 0.5, dtype="float32"), _row("b", 0.7), _row("c", 1.5), _row("d", 0.79),
            _row("e", 1.2), _row("f", 3.0, pct_peak_bw=90.0), _row("g", None, status="error", error="KeyError: x"),
            _row("h", None, status="skipped (time budget 480 s)")]
    md = H.summarize(rows, {"gpu": "NVIDIA H200", "not_benchmarked": ["zzz"]})
    g_ops = H.geomean([1.0, 0.7, 1.5, 0.79, 1.2, 3.0])
    assert f"**Geometric mean of ratios: {g_ops:.3f}x over 6 ops**" in md
    assert f"({H.geomean([2.0, 0.5, 0.7, 1.5, 0.79, 1.2, 3.0]):.3f}x over 7 rows)" in md
    slow = md.split("## Five slowest")[1].split("## Rows below")[0]
    order = [line.split("|")[1].strip() for line in slow.splitlines() if line.startswith("| ") and "x |" in line]
    assert order == ["b", "d", "a", "e", "c"]
    below = md.split("## Rows below 0.8x (3)")[1].split("##")[0]
    assert "a float32" in below and "b bfloat16" in below and "d bfloat16" in below and "c bfloat16" not in below
    assert "## Rows below 85 % of datasheet bandwidth (6 of 7)" in md
    assert "g bfloat16 32768x8192: KeyError: x" in md
    assert "1 errors, 1 skipped" in md and "zzz" in md
    assert "target >= 1.0x: met" in md  # g_ops = 1.12


def test_summary_without_ratios():
    md = H.summarize([_row("a", None, status="error", error="x")])
    assert "**Geometric mean of ratios: n/a**" in md and "(no rows with a ratio)" in md


# -- shapes file ----------------------------------------------------------------------------------------------

def test_repository_shapes_file_is_valid_and_big_enough():
    doc = H.load_shapes(os.path.join(BENCH, "shapes.json"))
    rows = [r for op in doc["ops"] for r in H.expand_cases(doc, op)]
    assert len(rows) > 100
    for case, shape, dt, call in rows:
        # issue 5's compute-bound GEMMs and decode linears are smaller by definition; they say why (small_ok)
        assert max(s.nbytes for s in call.inputs) >= H.MIN_TENSOR_BYTES or case.get("small_ok"), (shape, dt)
    # The families of issue 4's bandwidth targets are all there.
    for op in ("add", "exp", "relu", "copy_", "sum", "amax", "softmax", "log_softmax", "layer_norm", "rms_norm"):
        assert op in doc["ops"]
    # Casts are converting copies (x.to(dtype) runs copy_'s kernel): benchmarked under copy_.
    casts = [c[3].dtype_label for c in H.expand_cases(doc, "copy_") if c[0]["factory"] == "cast"]
    assert {"float32->bfloat16", "bfloat16->float32", "bfloat16->float8_e4m3fn"} <= set(casts)
    sm = [c for c in H.expand_cases(doc, "softmax") if c[1] == (32768, 8192) and c[2] == "bfloat16"]
    assert sm, "softmax 32768x8192 bf16 (the issue's example) must be benchmarked"


def _doc(ops, **defaults):
    return {"schema": 1, "defaults": {"shapes": [[32768, 8192]], "dtypes": ["bfloat16"], **defaults}, "ops": ops}


@pytest.mark.parametrize("ops, needle", [
    ({"x": {"factory": "nope"}}, "factory 'nope' is not one of"),
    ({"x": {"factory": "unary", "shapes": [[0, 4]]}}, "'shapes' must be a non-empty list"),
    ({"x": {"factory": "unary", "dtypes": ["float128"]}}, "'dtypes' must be"),
    ({"x": {"factory": "unary", "shapes": [[1024, 1024]]}}, "largest tensor is 2.0 MiB"),
    ({"x": {"factory": "unary", "colour": 1}}, "unknown keys ['colour']"),
    ({"x": {"factory": "unary", "domain": "weird"}}, "domain 'weird'"),
    ({"x": {"factory": "cast"}}, "needs 'to' naming a dtype"),
    ({"x": {"factory": "norm"}}, "unknown kind 'x'"),
    ({"x": {"factory": "binary", "inputs": [{}]}}, "'inputs' has 1 entries"),
    ({}, "'ops' must be a non-empty object"),
])
def test_shapes_schema_errors(ops, needle):
    errs = H.validate_shapes(_doc(ops))
    assert any(needle in e for e in errs), errs


def test_shapes_small_ok_and_bad_schema():
    assert H.validate_shapes(_doc({"x": {"factory": "unary", "shapes": [[8, 8]], "small_ok": "latency"}})) == []
    assert any("'schema' must be 1" in e for e in H.validate_shapes({"schema": 2, "ops": {"x": {"factory": "unary"}}}))
    assert H.validate_shapes([]) == ["the shapes file must be a JSON object"]


def test_expand_cases_defaults_override_and_quick():
    doc = _doc({"add": [{"factory": "binary", "dtypes": ["bfloat16", "float32"]},
                        {"factory": "unary", "args": [1.5], "label": "scalar"}]})
    doc["factories"] = {"binary": {"shapes": [[16384, 16384], [32768, 8192]]}}
    rows = H.expand_cases(doc, "add")
    assert [(r[1], r[2]) for r in rows] == [((16384, 16384), "bfloat16"), ((16384, 16384), "float32"),
                                            ((32768, 8192), "bfloat16"), ((32768, 8192), "float32"),
                                            ((32768, 8192), "bfloat16")]
    assert len(H.expand_cases(doc, "add", quick=True)) == 3
    assert rows[-1][3].args == [H.TensorRef(0), 1.5]


# -- factories and inputs -------------------------------------------------------------------------------------

def test_factories_build_the_expected_calls():
    n = H.FACTORIES["norm"]("layer_norm", (4, 8), "bfloat16", {})
    assert n.target == "F:layer_norm" and n.args == [H.TensorRef(0), [8], H.TensorRef(1), H.TensorRef(2)]
    assert [s.shape for s in n.inputs] == [(4, 8), (8,), (8,)]
    b = H.FACTORIES["norm"]("batch_norm", (2, 3, 4, 4), "float32", {})
    assert b.kwargs["training"] is False and b.inputs[2].domain == "positive"  # running_var > 0
    g = H.FACTORIES["norm"]("group_norm", (2, 64, 4, 4), "float32", {"groups": 8})
    assert g.args[1] == 8 and g.inputs[1].shape == (64,)
    c = H.FACTORIES["cast"]("_to_copy", (4, 8), "float32", {"to": "bfloat16"})
    assert c.target == "method:to" and c.args == [H.TensorRef(0), H.DTypeRef("bfloat16")]
    assert c.dtype_label == "float32->bfloat16"
    s = H.FACTORIES["softmax"]("softmax", (4, 8), "bfloat16", {})
    assert s.kwargs == {"dim": -1}
    a = H.FACTORIES["activation"]("gelu", (4, 8), "bfloat16", {"kwargs": {"approximate": "tanh"}})
    assert a.target == "F:gelu" and a.kwargs == {"approximate": "tanh"}
    w = H.FACTORIES["ternary"]("where", (4, 8), "bfloat16", {"inputs": [{"dtype": "bool"}, {}, {}]})
    assert [s.dtype for s in w.inputs] == ["bool", "bfloat16", "bfloat16"]
    o = H.FACTORIES["unary"]("exp", (4, 8), "float32", {"out": True})
    assert o.kwargs["out"] == H.TensorRef(1) and o.inputs[1].fresh
    cp = H.FACTORIES["copy"]("copy_", (4, 8), "float32", {})
    assert cp.inputs[0].fresh and not cp.inputs[1].fresh and cp.target == "method:copy_"


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float8_e4m3fn", "int32", "bool", "uint8"])
def test_host_array_dtype_shape_and_determinism(dtype):
    spec = H.InputSpec((3, 5, 7), dtype, seed=3)
    a, b = H.host_array(spec), H.host_array(spec)
    assert a.shape == (3, 5, 7) and a.dtype == H._np_dtype(dtype) and a.flags.c_contiguous
    assert a.tobytes() == b.tobytes()
    assert a.tobytes() != H.host_array(H.InputSpec((3, 5, 7), dtype, seed=4)).tobytes() or dtype == "bool"


def test_host_array_domains():
    f = lambda d, dt="float32": H.host_array(H.InputSpec((1000,), dt, d)).astype(np.float64)  # noqa: E731
    assert f("positive").min() > 0
    assert np.abs(f("unit")).max() < 1
    assert f("ge1").min() > 1
    assert np.abs(f("nonzero")).min() >= 0.5 and f("nonzero").min() < 0 < f("nonzero").max()
    assert set(np.unique(f("shift", "int32"))) <= set(range(8))
    assert f("positive", "int32").min() >= 1
    with pytest.raises(ValueError, match="unknown domain"):
        H.host_array(H.InputSpec((4,), "float32", "nope"))


def test_host_array_large_is_cheap_and_periodic():
    import time
    spec = H.InputSpec((64, 1 << 20), "bfloat16")     # 128 MiB
    t = time.perf_counter()
    a = H.host_array(spec)
    assert time.perf_counter() - t < 5.0
    assert a.nbytes == spec.nbytes == 128 * MiB


# -- peer protocol --------------------------------------------------------------------------------------------

def test_call_json_roundtrip_and_message_encoding():
    call = H.Call([H.InputSpec((2, 3), "bfloat16", "positive", 1), H.InputSpec((3,), "bool", "bool", 2, True)],
                  "fn:where", [H.TensorRef(1), H.TensorRef(0), 0.5], {"dtype": H.DTypeRef("float32"),
                                                                          "dims": (0, 1)}, "bfloat16")
    msg = {"cmd": "bench", "id": 7, "call": call.to_json(), "timing": vars(H.TimingConfig.quick())}
    line = H.encode_message(msg)
    assert line.endswith("\n") and line.count("\n") == 1
    back = H.decode_message(line)
    c2 = H.Call.from_json(back["call"])
    assert c2.inputs == call.inputs and c2.args == call.args and c2.target == call.target
    assert c2.kwargs == {"dtype": H.DTypeRef("float32"), "dims": [0, 1]}
    assert H.TimingConfig(**back["timing"]) == H.TimingConfig.quick()
    with pytest.raises(ValueError):
        H.decode_message("[1, 2]")
    with pytest.raises(TypeError, match="cannot encode"):
        H.encode_args(object())


def test_resolve_call_targets():
    class T:
        def __init__(self, v):
            self.v = v

        def twice(self, k=2):
            return self.v * k
    F = types.SimpleNamespace(gelu=lambda t, approximate="none": ("F.gelu", t.v, approximate))
    lib = types.SimpleNamespace(__name__="fakelib", neg=lambda t: -t.v, nn=types.SimpleNamespace(functional=F),
                                float32="f32", to=lambda t, dt: (t.v, dt))
    t = T(3)
    assert H.resolve_call(lib, H.Call([], "fn:neg", [H.TensorRef(0)]), [t])() == -3
    assert H.resolve_call(lib, H.Call([], "fn:gelu", [H.TensorRef(0)], {"approximate": "tanh"}), [t])() == \
        ("F.gelu", 3, "tanh")
    assert H.resolve_call(lib, H.Call([], "F:gelu", [H.TensorRef(0)]), [t])()[0] == "F.gelu"
    assert H.resolve_call(lib, H.Call([], "method:twice", [H.TensorRef(0)], {"k": 5}), [t])() == 15
    assert H.resolve_call(lib, H.Call([], "fn:twice", [H.TensorRef(0)]), [t])() == 6
    assert H.resolve_call(lib, H.Call([], "fn:to", [H.TensorRef(0), H.DTypeRef("float32")]), [t])() == (3, "f32")
    with pytest.raises(AttributeError, match="fakelib has no 'F:neg'"):
        H.resolve_call(lib, H.Call([], "F:neg", [H.TensorRef(0)]), [t])
    with pytest.raises(ValueError, match="expected 'fn:<name>'"):
        H.resolve_call(lib, H.Call([], "neg", []), [t])


def _peer(lines, python=sys.executable, timeout=120):
    p = subprocess.run([python, os.path.join(BENCH, "peer_torch.py")], input="".join(lines), capture_output=True,
                       text=True, timeout=timeout)
    return [json.loads(x) for x in p.stdout.splitlines()], p


def test_peer_answers_every_line_even_without_torch():
    bad = H.encode_message({"cmd": "bench", "id": 2, "call": {"nonsense": 1}})
    replies, p = _peer(["not json\n", H.encode_message({"cmd": "frobnicate", "id": 1}), bad,
                        H.encode_message({"cmd": "quit", "id": 3})])
    assert [r.get("id") for r in replies] == [None, 1, 2, 3]
    assert not replies[0]["ok"] and "unknown cmd 'frobnicate'" in replies[1]["error"]
    assert not replies[2]["ok"] and replies[3]["ok"]


@pytest.mark.parity
def test_peer_measures_with_torch_on_cpu():
    call = H.FACTORIES["norm"]("layer_norm", (64, 128), "bfloat16", {})
    cast = H.FACTORIES["cast"]("_to_copy", (64, 128), "float32", {"to": "float8_e4m3fn"})
    timing = vars(H.TimingConfig(warmup_ms=1, rep_ms=2, min_reps=3, max_reps=5, flush_bytes=1 << 16))
    replies, p = _peer([H.encode_message({"cmd": "hello", "id": 0})] +
                       [H.encode_message({"cmd": "bench", "id": i + 1, "call": c.to_json(), "device": "cpu",
                                          "timing": timing}) for i, c in enumerate([call, cast])])
    assert replies[0]["ok"] and replies[0]["torch"], p.stderr
    for r in replies[1:]:
        assert r["ok"], r
        assert 3 <= r["reps"] == len(r["times_ms"]) <= 5 and r["p20_ms"] <= r["p50_ms"] <= r["p80_ms"]
        assert r["flush"] == "clean"          # the default mode, taken from the request's timing
    assert replies[1]["out_bytes"] == 64 * 128 * 2 and replies[2]["out_bytes"] == 64 * 128
    timing["flush_mode"] = "write"
    replies, p = _peer([H.encode_message({"cmd": "bench", "id": 1, "call": call.to_json(), "device": "cpu",
                                          "timing": timing})])
    assert replies[0]["ok"] and replies[0]["flush"] == "write", replies


def test_peer_inputs_are_bit_identical_to_ours():
    """Both processes build inputs from the same InputSpec with host_array: the bytes are the spec's."""
    spec = H.InputSpec((4, 6), "bfloat16", "unit", 9)
    raw = H.host_array(spec).reshape(-1).view(np.uint8)
    assert raw.tobytes() == H.host_array(H.InputSpec.from_json(json.loads(json.dumps(spec.to_json())))) \
        .reshape(-1).view(np.uint8).tobytes()


# -- timing ---------------------------------------------------------------------------------------------------

class _CountingClock(H.Clock):
    def __init__(self):
        self.log = []

    def event(self):
        clock = self

        class E(H.HostEvent):
            def record(self, stream=None):
                super().record()
                clock.log.append("record")
        return E()

    def synchronize(self):
        self.log.append("sync")

    def flush(self):
        self.log.append("flush")


def test_run_benchmark_flushes_before_every_timed_run():
    calls = []
    clock = _CountingClock()
    cfg = H.TimingConfig(warmup_ms=0.0, rep_ms=0.0, min_reps=7, max_reps=9)
    times = H.run_benchmark(lambda: calls.append(1), clock, cfg)
    assert len(times) == 7 and all(t >= 0 for t in times)
    # first call + 5 estimate runs + >= 1 warm-up + 7 timed runs
    assert len(calls) >= 1 + 5 + 1 + 7
    timed = clock.log[-(3 * 7 + 1):]
    assert timed == ["flush", "record", "record"] * 7 + ["sync"]


def test_run_benchmark_rep_count_follows_rep_ms():
    import time
    cfg = H.TimingConfig(warmup_ms=1.0, rep_ms=30.0, min_reps=2, max_reps=1000, flush_bytes=1024)
    times = H.run_benchmark(lambda: time.sleep(0.002), H.host_clock(1024), cfg)
    assert 2 <= len(times) <= 30
    assert H.percentiles(times)[1] >= 1.9


# -- the L2 flush mode ----------------------------------------------------------------------------------------

def test_flush_mode_defaults_to_clean_and_is_checked():
    assert H.TimingConfig().flush_mode == "clean" and H.TimingConfig.quick().flush_mode == "clean"
    assert H.FLUSH_MODES == ("clean", "write")
    assert H.TimingConfig(flush_mode="write").flush_mode == "write"
    with pytest.raises(ValueError, match=r"flush_mode must be one of \('clean', 'write'\), got 'read'"):
        H.TimingConfig(flush_mode="read")
    with pytest.raises(ValueError, match="flush_sequence: flush_mode"):
        H.flush_sequence("dirty", lambda: None, lambda: None)
    with pytest.raises(ValueError, match="host_clock: flush_mode"):
        H.host_clock(1024, "dirty")
    # The mode travels to the peer in the timing config the protocol sends.
    back = json.loads(H.encode_message({"timing": vars(H.TimingConfig(flush_mode="write"))}))
    assert H.TimingConfig(**back["timing"]).flush_mode == "write"
    assert H.describe_flush(H.TimingConfig()).startswith("clean (256 MiB write + 256 MiB read-only sum")
    assert H.describe_flush(H.TimingConfig(flush_mode="write", flush_bytes=1 << 20)).startswith("write (1 MiB write")


def test_flush_sequence_clean_writes_then_reads_write_only_writes():
    log = []
    H.flush_sequence("clean", lambda: log.append("w"), lambda: log.append("r"))()
    assert log == ["w", "r"]
    log.clear()
    H.flush_sequence("write", lambda: log.append("w"), lambda: log.append("r"))()
    assert log == ["w"]


def test_host_clock_clean_flush_reads_a_second_buffer(monkeypatch):
    sums = []
    zeros = np.zeros
    monkeypatch.setattr(H.np, "ones", lambda *a, **k: _SumSpy(zeros(*a, **k), sums))
    clean = H.host_clock(4096, "clean")
    write = H.host_clock(4096, "write")
    monkeypatch.undo()
    clean.flush()
    assert sums == [1024]       # a read of flush_bytes // 4 float32 values
    write.flush()
    assert sums == [1024]       # the write mode reads nothing


class _SumSpy:
    def __init__(self, arr, log):
        self.arr, self.log = arr, log

    def sum(self):
        self.log.append(self.arr.size)
        return self.arr.sum()


def test_make_clock_on_the_host_follows_the_mode():
    import nbxtensor as nbx
    notes = []
    for mode in H.FLUSH_MODES:
        c = bench_ops.make_clock(nbx, "cpu", 4096, notes, mode)
        c.flush()
        s, e = c.event(), c.event()
        s.record()
        e.record()
        assert s.elapsed_time(e) >= 0
    with pytest.raises(ValueError, match="flush_mode"):
        bench_ops.make_clock(nbx, "cpu", 4096, notes, "nope")
    assert not notes


def test_sweep_parser_flush_option_reaches_start(tmp_path, capsys):
    import sweep_common as SC
    import nbxtensor as nbx
    try:
        p = SC.sweep_parser("doc", "out")
        assert p.parse_args(["--out", "x"]).flush == "clean"
        assert p.parse_args(["--out", "x", "--flush", "write"]).flush == "write"
        with pytest.raises(SystemExit):
            p.parse_args(["--out", "x", "--flush", "none"])
        st = SC.start("t", nbx, "cpu", str(tmp_path), True)       # takes the --flush parsed last
        assert st.timing.flush_mode == "write" and st.notes[0].startswith("L2 flush write")
        st = SC.start("t", nbx, "cpu", str(tmp_path), True, flush_mode="clean")
        assert st.timing.flush_mode == "clean" and st.notes[0].startswith("L2 flush clean")
        p.parse_args(["--out", "x"])
        assert SC.start("t", nbx, "cpu", str(tmp_path), True).timing.flush_mode == "clean"
    finally:
        SC._parsed_flush[:] = []


# -- peaks and the roofline -----------------------------------------------------------------------------------

def test_load_peaks_card_table_and_facts(tmp_path):
    peaks = H.load_peaks("NVIDIA H200", None, None, os.path.join(BENCH, "peaks.json"))
    assert peaks["memory_bandwidth_GBps"] == 4800 and peaks["tflops"]["bfloat16"] == pytest.approx(989.5)
    assert H.load_peaks("NVIDIA H100 PCIe", None, None, os.path.join(BENCH, "peaks.json"))[
        "memory_bandwidth_GBps"] == 2000
    assert H.load_peaks("Some Card", None, None, os.path.join(BENCH, "peaks.json")) == {}
    (tmp_path / "sm99.json").write_text(json.dumps({"memory": {"memory_bandwidth_TBps": 9.0},
                                                     "peak_tflops": {"bfloat16": 2000}}))
    fp = H.load_peaks("Some Card", "sm99", str(tmp_path), os.path.join(BENCH, "peaks.json"))
    assert fp["memory_bandwidth_GBps"] == 9000 and fp["tflops"] == {"bfloat16": 2000.0}
    both = H.load_peaks("NVIDIA H200", "sm99", str(tmp_path), os.path.join(BENCH, "peaks.json"))
    assert both["memory_bandwidth_GBps"] == 4800  # the card's datasheet wins over an architecture default
    assert H.peak_tflops_for(peaks, "bfloat16->float32") == pytest.approx(989.5)


def test_write_png_is_a_valid_png(tmp_path):
    img = np.zeros((7, 5, 3), np.uint8)
    img[3, 2] = (255, 0, 0)
    path = str(tmp_path / "x.png")
    H.write_png(path, img)
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    assert (w, h) == (5, 7)
    idat = data.index(b"IDAT")
    n = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = zlib.decompress(data[idat + 4:idat + 4 + n])
    assert len(raw) == 7 * (1 + 5 * 3) and raw[3 * 16 + 1 + 2 * 3] == 255


def test_roofline_draws_or_reports(tmp_path):
    rows = [_row("add", 1.0, flops=1 << 28, peer_p50_ms=0.3), _row("copy_", 1.0, peer_p50_ms=0.31)]
    msg = H.plot_roofline(rows, {"memory_bandwidth_GBps": 4800, "tflops": {"bfloat16": 989.5}},
                          str(tmp_path / "r.png"))
    assert "wrote" in msg and (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert "no ok rows" in H.plot_roofline([], {}, str(tmp_path / "s.png"))


# -- the plan and an end-to-end smoke run ---------------------------------------------------------------------

def test_plan_is_round_robin_and_reports_coverage():
    rec = lambda name, fam="elementwise", triton=True: types.SimpleNamespace(  # noqa: E731
        name=name, family=fam, triton=(lambda: None) if triton else None)
    doc = _doc({"a": {"factory": "unary", "dtypes": ["bfloat16", "float32"]}, "b": {"factory": "unary"},
                "c": {"factory": "softmax", "dtypes": ["bfloat16", "float32"]}, "gone": {"factory": "unary"}})
    recs = [rec("a"), rec("b"), rec("c", "softmax"), rec("d"), rec("e", triton=False)]
    plan, missing, stale = bench_ops.build_plan(recs, doc, [], quick=False)
    assert [(p[0].name, p[3]) for p in plan] == [("a", "bfloat16"), ("b", "bfloat16"), ("c", "bfloat16"),
                                                 ("a", "float32"), ("c", "float32")]
    assert missing == ["d"] and stale == ["gone"]
    plan, _, _ = bench_ops.build_plan(recs, doc, ["family:softmax", "b*"], quick=True)
    assert [p[0].name for p in plan] == ["b", "c"]


_SMOKE = textwrap.dedent('''
    import sys, numpy as np
    sys.path.insert(0, {src!r}); sys.path.insert(0, {bench!r})
    import nbxtensor as nbx
    from nbxtensor.ops.registry import OpRecord, Cost, register

    def neg(x):
        return nbx.from_numpy(np.ascontiguousarray(-x.numpy()))

    def broken(x):
        raise RuntimeError("planted failure")

    nbx.benchtest_neg, nbx.benchtest_broken = neg, broken
    if not hasattr(nbx, "neg"):
        nbx.neg = neg  # stand-in until the elementwise family provides it
    cost = lambda x: Cost(flops=x.numel(), bytes_read=x.nbytes, bytes_written=x.nbytes)
    for name in ("benchtest_neg", "benchtest_broken", "benchtest_undeclared", "benchtest_torchneg"):
        register(OpRecord(name, "test", cpu=None, cost=cost if name != "benchtest_undeclared" else (lambda: 0),
                          oracle_note="stand-in", triton=lambda *a: None))
    import bench_ops
    rc = bench_ops.main(sys.argv[1:])
    assert "torch" not in sys.modules, "the library's process imported torch"
    sys.exit(rc)
''')


def _smoke(tmp_path, *extra):
    shapes = {"schema": 1, "defaults": {"shapes": [[64, 32]], "dtypes": ["float32", "bfloat16"],
                                         "small_ok": "smoke test"},
              "ops": {"benchtest_neg": {"factory": "unary", "call": "fn:benchtest_neg"},
                      "benchtest_broken": {"factory": "unary", "call": "fn:benchtest_broken"},
                      "benchtest_undeclared": {"factory": "unary", "call": "fn:benchtest_neg"},
                      "benchtest_torchneg": {"factory": "unary", "call": "fn:neg"}}}
    (tmp_path / "shapes.json").write_text(json.dumps(shapes))
    (tmp_path / "run.py").write_text(_SMOKE.format(src=os.path.join(REPO, "src"), bench=BENCH))
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, str(tmp_path / "run.py"), "--out", str(out), "--device", "cpu",
                        "--shapes", str(tmp_path / "shapes.json"), "--quick", *extra], capture_output=True, text=True,
                       timeout=300, env={**{k: v for k, v in os.environ.items() if k != "NBX_TRITON_INTERPRET"},
                                         "NBX_GIT_COMMIT": "smoke-test"})
    return p, out


def test_bench_ops_smoke_run_records_errors_and_goes_on(tmp_path):
    p, out = _smoke(tmp_path, "--no-peer")
    assert p.returncode == 0, p.stderr + p.stdout
    rows = H.read_csv(str(out / "results.csv"))
    by = {r["op"]: r for r in rows}
    assert set(by) == {"benchtest_neg", "benchtest_broken", "benchtest_undeclared", "benchtest_torchneg"}
    assert by["benchtest_broken"]["status"] == "error" and "planted failure" in by["benchtest_broken"]["error"]
    ok = by["benchtest_neg"]
    assert ok["status"] == "ok" and ok["cost_source"] == "declared"
    assert ok["bytes"] == 2 * 64 * 32 * 4 and ok["flops"] == 64 * 32
    assert ok["gbps"] == pytest.approx(ok["bytes"] / (ok["p50_ms"] * 1e-3) / 1e9, rel=1e-3)
    assert ok["p20_ms"] <= ok["p50_ms"] <= ok["p80_ms"]
    assert by["benchtest_undeclared"]["cost_source"] == "io-fallback"
    assert {r["flush"] for r in rows} == {"clean"}
    md = (out / "summary.md").read_text()
    assert "planted failure" in md and "torch in library process: no" in md and "benchtest_undeclared" in md
    assert "- flush: clean (8 MiB write + 8 MiB read-only sum before each run)" in md
    assert (out / "roofline.png").exists() and "planted failure" in (out / "bench.log").read_text()
    # --strict turns a failed row into exit 1; a second run appends.
    p2, _ = _smoke(tmp_path, "--no-peer", "--strict")
    assert p2.returncode == 1
    assert len(H.read_csv(str(out / "results.csv"))) == 8
    # --resume re-measures only what is not ok yet, and the summary covers the earlier rows too.
    p3, _ = _smoke(tmp_path, "--no-peer", "--resume")
    assert p3.returncode == 0, p3.stderr
    rows = H.read_csv(str(out / "results.csv"))
    assert len(rows) == 9 and rows[-1]["op"] == "benchtest_broken"
    md = (out / "summary.md").read_text()
    assert "--resume: 3 rows already measured" in md and "| benchtest_neg |" in md
    # Rows measured with the other flush mode are not taken over by --resume.
    p4, _ = _smoke(tmp_path, "--no-peer", "--resume", "--flush", "write")
    assert p4.returncode == 0, p4.stderr
    rows = H.read_csv(str(out / "results.csv"))
    assert len(rows) == 13 and {r["flush"] for r in rows[-4:]} == {"write"}
    assert "- flush: write (8 MiB write before each run" in (out / "summary.md").read_text()


@pytest.mark.parity
def test_bench_ops_smoke_run_with_the_torch_peer(tmp_path):
    """The peer: torch in its own process (here CPU torch, for the stand-in op resolved as torch.neg)."""
    p, out = _smoke(tmp_path, "--ops", "benchtest_neg,benchtest_torchneg")
    assert p.returncode == 0, p.stderr + p.stdout
    by = {r["op"]: r for r in H.read_csv(str(out / "results.csv"))}
    # torch has no benchtest_neg: the peer's error is recorded in the row and the run goes on.
    assert by["benchtest_neg"]["status"] == "ok" and "has no 'fn:benchtest_neg'" in by["benchtest_neg"]["peer_error"]
    r = by["benchtest_torchneg"]
    assert r["status"] == "ok" and r["peer_error"] is None and r["peer_p50_ms"] > 0
    assert r["ratio"] == pytest.approx(r["peer_p50_ms"] / r["p50_ms"], rel=1e-3) and r["peer_gbps"] > 0
    assert "Geometric mean of ratios: " in (out / "summary.md").read_text()


def test_bench_ops_list_and_no_cuda(tmp_path):
    p = subprocess.run([sys.executable, os.path.join(BENCH, "bench_ops.py"), "--out", str(tmp_path), "--list"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "rows;" in p.stdout, p.stderr
    import nbxtensor as nbx
    if not (hasattr(nbx, "cuda") and nbx.cuda.is_available()):
        p = subprocess.run([sys.executable, os.path.join(BENCH, "bench_ops.py"), "--out", str(tmp_path / "o")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and "no CUDA device" in p.stderr


@pytest.mark.gpu
def test_bench_ops_on_the_gpu(tmp_path):
    import nbxtensor as nbx
    if not (hasattr(nbx, "cuda") and nbx.cuda.is_available()):
        pytest.skip("no CUDA device")
    p = subprocess.run([sys.executable, os.path.join(BENCH, "bench_ops.py"), "--out", str(tmp_path), "--quick",
                        "--ops", "add,softmax", "--budget-s", "120"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rows = H.read_csv(str(tmp_path / "results.csv"))
    assert rows and all(r["status"] == "ok" for r in rows), [r.get("error") for r in rows]


def test_the_whole_matrix_runs_on_the_host(tmp_path):
    """Every shapes entry whose op is in the table calls nbxtensor correctly: the real matrix on tiny tensors
    (--max-dim 8) on the host clock. A row that cannot run here would be an error row on the GPU."""
    p = subprocess.run([sys.executable, os.path.join(BENCH, "bench_ops.py"), "--out", str(tmp_path), "--device",
                        "cpu", "--max-dim", "8", "--quick", "--no-peer", "--budget-s", "0"], capture_output=True,
                       text=True, timeout=600, env={**{k: v for k, v in os.environ.items()
                                                       if k != "NBX_TRITON_INTERPRET"}, "NBX_GIT_COMMIT": "t"})
    assert p.returncode == 0, p.stderr[-3000:]
    rows = H.read_csv(str(tmp_path / "results.csv"))
    assert rows, p.stdout
    bad = [f"{r['op']} {r['dtype']} {r.get('label') or ''}: {r['error']}" for r in rows if r["status"] != "ok"]
    assert not bad, bad
    assert all(r["cost_source"] == "declared" for r in rows), \
        [r["op"] for r in rows if r["cost_source"] != "declared"]


def test_read_ceiling_interpolates_and_annotates_rows():
    """The read-ceiling rows give, per size, the better of ours and the peer's rate, interpolated in log bytes and
    held past the ends; rows below the bandwidth target name the ceiling at their size."""
    ceil = [_row("sum", 1.0, label="read-ceiling", bytes=1 << 23, pct_peak_bw=25.0, peer_pct_peak_bw=14.0),
            _row("sum", 1.0, label="read-ceiling", bytes=1 << 27, pct_peak_bw=70.0, peer_pct_peak_bw=77.0)]
    f = H.read_ceiling(ceil)
    assert f(1 << 20) == 25.0 and f(1 << 30) == 77.0                   # held past the ends
    assert f(1 << 25) == pytest.approx(25.0 + 0.5 * (77.0 - 25.0))     # half way in log(bytes)
    assert H.read_ceiling([_row("sum", 1.0)]) is None                  # no ceiling rows: none
    gemv = _row("linear", 1.1, bytes=1 << 25, pct_peak_bw=45.5)
    md = H.summarize(ceil + [gemv])
    line = next(x for x in md.splitlines() if x.startswith("- linear"))
    assert "read ceiling at this size 51.0 %, the row at 89 % of it" in line
    assert all("read ceiling at this size" not in x for x in md.splitlines() if x.startswith("- sum"))
    assert "read ceiling at this size" not in H.summarize([gemv])
    tiny = _row("neg", 0.9, bytes=4, pct_peak_bw=0.0)                    # far below the measured sizes
    dense = _row("sdpa", 0.7, bytes=1 << 25, flops=1 << 36, pct_peak_bw=4.0)   # compute-bound
    md = H.summarize(ceil + [tiny, dense])
    assert all("read ceiling at this size" not in x for x in md.splitlines() if x.startswith(("- neg", "- sdpa")))
