"""Sweep of the launch settings of the pointwise kernels on the GPU (issue 4's elementwise, activation and cast rows).

Groups (``--group``): ``issue4`` (the default) times ``remainder``'s schedules (REMAINDER_VARIANTS) on bfloat16
32768x8192 and float32 16384x8192 (a ``nonzero`` divisor, as bench_ops.py), and BLOCK in {1024, 2048, 4096} x
num_warps {4, 8}, streaming stores and a persistent grid (GRID; 1024 / 4 warps is PyTorch's
vectorized_elementwise_kernel: 128 threads x 8 elements) for abs, neg, exp, add, mul by a scalar and clamp in both
dtypes; it has no numerics pass (every variant is checked against the table's output, the table's against the
oracle). ``activations`` is the earlier sweep below; ``math16`` times ``FAST_MATH16`` (ops/fast_math16.py: cheaper
float32 math for 16-bit outputs) against the table's body on the ops it covers (MATH16_CASES); ``all`` every group.

Cases of ``activations`` (bfloat16 32768x8192, the issue's >= 256 MiB tensors): ``relu``, ``copy_`` (bf16 ->
bf16), ``add``, ``mul``, ``gelu`` (erf), ``gelu`` (tanh), ``silu``, ``mish``, ``hardtanh``, ``logsigmoid``, ``exp``,
the cast bf16 -> float8_e4m3fn (``copy_``), and ``asinh``, ``atan``, ``sinh`` (~0.6x PyTorch in an earlier run). The ops
run through their public functions; every kernel is the pointwise generator's (ops/pointwise.py), which reads its
settings from the ``pointwise`` rule of runtime/configs/sm90.json (the ``copy`` rule for ``copy_``). Each
candidate setting is laid over that rule with :func:`nbxtensor.runtime.configs.override` and timed with CUDA events
and an L2 flush before every run (benchmarks/harness.py ``run_benchmark``/``percentiles``; bench_ops.py's clock).
Bytes moved: inputs read once and the output written once (the ops' cost declarations), so GB/s and % of 4800 GB/s
(H200 HBM3e) are comparable with bench_ops.py.

Settings (keys of the rules; absent = the kernels' defaults):

- ``BLOCK``/``num_warps``: elements per program and warps; ``BLOCK / (32 * num_warps)`` elements per thread, in
  16-byte vectors (8 bf16). The sm90 table has 1024 / 4 warps (8 per thread) for large tensors (4096 / 8 before
  this session's sweep).
- ``EVICT``: 1 loads with ``evict_first``; 2 also streaming (``.cs``) stores.
- ``programs_per_sm``: a persistent grid of that many programs per SM (132 on the H200), each looping over the
  tiles (a grid that is a multiple of the SM count, no tail wave, fewer CTA launches).
- ``HW_CVT``: 0 replaces the GPU's conversion instructions (cvt.rn.bf16x2.f32, cvt.rn.satfinite.e4m3x2.f32, ...)
  by the bit formulas the interpreter tier runs: an ablation that must give the same bits.
- ``FAST``: 0 replaces the 16-bit-output bodies of the smooth activations and of asinh/atan/sinh (ex2.approx /
  rcp.approx formulas, ops/activation.py and ops/elementwise.py) by the exact ones (libdevice, IEEE division):
  an ablation, compared within the tolerance.

Checks, never hidden: the table variant of every case against the float64 oracle on the first 2**18 elements
(host; casts bit-exactly against nbxtensor.dtypes.casting); every other variant against the table's output on the
device: bit-equal where only the schedule changed (``ok (bits)``), within the dtype's tolerance for ``FAST=0``
(``ok (tol; n differ)``). Before the timings a numerics pass runs on the device (``--no-numerics`` skips it):
float32 -> bfloat16 / float16 / float8 edge values and ties, and float8 -> float32, with and without ``HW_CVT``,
against the casting rules bit for bit; and every finite bfloat16 through the fast bodies of gelu (both), silu,
mish and logsigmoid against the oracle (count beyond the tolerance: must be 0; count not equal to the correctly
rounded result: expected well below 1 %); also asinh, atan and sinh.

Variants run rank by rank across cases (every case's table setting, then every case's first candidate, ...), most
promising first, and the sweep stops starting work when ``--budget-s`` (default 120 s, compiles included) would be
passed. Every exception is recorded per variant (``sweep_pointwise.log``) and the sweep goes on.

Run on the H200 from the source tree::

    PYTHONPATH=src python3 benchmarks/sweep_pointwise.py --out $OUT/sweep --budget-s 120
    PYTHONPATH=src python3 benchmarks/sweep_pointwise.py --group activations --out $OUT/sweep --budget-s 120

Smoke test without a GPU (the interpreter runs the same variants on tiny shapes)::

    NBX_TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/sweep_pointwise.py --device cpu --smoke --out /tmp/sw

Writes ``DIR/sweep_pointwise.csv`` (one row per case and variant) and prints the numerics pass, per case the table
setting and the best variants (GB/s, % of 4800, ms, check), the best variant per case and, per rule, the setting
with the best geometric mean over its cases (what to write into runtime/configs/sm90.json).
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep_common as SC  # noqa: E402  (puts src on the path)

import numpy as np  # noqa: E402

import harness as H  # noqa: E402

PEAK_GBPS = SC.PEAK_GBPS  # H200 HBM3e datasheet
TARGET_PCT = H.TARGET_PCT_BW
SAMPLE = 1 << 18  # elements checked against the oracle on the host

# Candidate settings, most promising first; the table's rule always runs first as "table". The ablations of a
# case (ABLATIONS) are inserted after the first two.
VARIANTS = {
    "pointwise": [  # table (> 4 Mi elements): BLOCK 4096, 8 warps: 16 bf16 (2 x 16 B) per thread and operand
        {"BLOCK": 8192, "num_warps": 8},    # 4 x 16 B in flight per thread and operand
        {"BLOCK": 4096, "num_warps": 4},    # the same per thread, half the CTA
        {"programs_per_sm": 8},             # persistent: 8 CTAs of 256 threads fill an SM (<= 32 registers)
        {"EVICT": 1},
        {"BLOCK": 2048, "num_warps": 4},
        {"BLOCK": 8192, "num_warps": 16},
        {"EVICT": 2},
        {"BLOCK": 8192, "num_warps": 8, "programs_per_sm": 4},
        {"BLOCK": 16384, "num_warps": 16},
        {"BLOCK": 8192, "num_warps": 4},    # 8 x 16 B per thread: latency hidden by one thread's loads
        {"BLOCK": 1024, "num_warps": 4},
    ],
    "copy": [
        {"BLOCK": 8192, "num_warps": 8},
        {"BLOCK": 4096, "num_warps": 4},
        {"programs_per_sm": 8},
        {"EVICT": 2},
        {"BLOCK": 2048, "num_warps": 4},
        {"BLOCK": 8192, "num_warps": 16},
        {"EVICT": 1},
        {"BLOCK": 16384, "num_warps": 16},
        {"BLOCK": 8192, "num_warps": 4},
    ],
}
# The issue-4 group (the default, --group issue4): BLOCK x num_warps of simple ops at >= 256 MiB, most promising
# first (a previous sweep put BLOCK 2048 ~2 % ahead of the old table's 4096 / 8 warps); the table runs first.
GRID = [
    {"BLOCK": 1024, "num_warps": 4},    # PyTorch's vectorized_elementwise_kernel: 128 threads x 8 elements, one
                                        # (bf16) or two (f32) 16-byte vectors per thread and operand
    {"BLOCK": 2048, "num_warps": 8},    # 8 per thread, 256 threads
    {"BLOCK": 2048, "num_warps": 4},    # 16 per thread: 2 (bf16) / 4 (f32) 16-byte loads in flight per operand
    {"BLOCK": 1024, "num_warps": 8},    # 4 per thread
    {"BLOCK": 4096, "num_warps": 4},    # 32 per thread: 4 (bf16) / 8 (f32) 16-byte loads per operand
    {"BLOCK": 1024, "num_warps": 4, "EVICT": 2},              # + evict_first loads, streaming (.cs) stores
    {"BLOCK": 2048, "num_warps": 8, "programs_per_sm": 8},   # persistent grid-stride, 64 warps per SM
]
# remainder (ATen's fmod body, ops/elementwise.py): sm_90 registers per thread (bf16) 60 at 4096 / 8 warps (32 warps
# per SM), 34 at 2048 / 8. (Two branch-free float32 bodies were timed here in session 4 and dropped, slower on the
# H200: see _remainder_b in ops/elementwise.py.)
REMAINDER_VARIANTS = [
    # ALT_REMAINDER (ops/elementwise.py _remainder_a: bit for bit the table's body): an fma path with an exact
    # certificate and a per-element branch to an exact fmod on the bits (sm_90 bf16: 22.6 SASS instructions per
    # element on the fast path, 127.6 static). (Its first version, a block-uniform fallback at one warp per
    # program: 63.3 % of 4800 GB/s, dropped.)
    {"ALT_REMAINDER": 1, "BLOCK": 1024, "num_warps": 4},
    {"ALT_REMAINDER": 1, "BLOCK": 2048, "num_warps": 8},
    {"ALT_REMAINDER": 1, "BLOCK": 2048, "num_warps": 4},
    {"BLOCK": 2048, "num_warps": 8},                          # 48 warps per SM
    {"BLOCK": 1024, "num_warps": 4},
    # 4 elements per thread (8-byte bf16 accesses), as PyTorch's vectorized kernel: more warps per SM to hide the
    # branchy body (sm_90 SASS of the bf16 body: 82.5 static instructions per element, 57 forward branches per 8
    # elements, no loop; an untested guess that the schedule, not the count, is what separates it from PyTorch)
    {"BLOCK": 512, "num_warps": 4},
    {"BLOCK": 256, "num_warps": 2},
]
# The alternative bodies behind config keys (ops/pointwise.py ``Alt``, default off; group ``alt``): the key at the
# table's schedule first, then with a second schedule. sm_90 SASS per element (bf16): cosh 25.25 -> 8.62, rsqrt
# 49.12 -> 8.00 (float32 48.12 -> 7.25), pow 124.12 -> 60.25 (pow(x, 2.5) 118.38 -> 51.38; session 6's bodies:
# 48.0 and 12.0, H200 before them pow 53.6 %, pow(x, 2.5) 42.7 % of 4800 GB/s with the key on); session 4's
# bench_ops: cosh 78 %, rsqrt 82 % of 4800 GB/s, pow 0.861x PyTorch.
ALT_CASES = [  # (case name, op, key, dtype, input domain, second operand: None, "tensor" or a Python scalar)
    ("cosh bf16", "cosh", "ALT_COSH", "bfloat16", "small", None),
    ("rsqrt bf16", "rsqrt", "ALT_RSQRT", "bfloat16", "positive", None),
    ("pow bf16", "pow", "ALT_POW", "bfloat16", "positive", "tensor"),
    ("pow scalar bf16", "pow", "ALT_POW", "bfloat16", "positive", 2.5),
    ("remainder alt bf16", "remainder", "ALT_REMAINDER", "bfloat16", "nonzero", "tensor"),
    # ALT_POW = 2 (_pow_a2, the tensor-exponent body at FAST_MATH16 level 2's accuracy; sm_90 bf16 32.5 SASS per
    # element against ALT_POW 1's 48.0, H200 70.5 %); a key "KEY=v" sets v
    ("pow alt2 bf16", "pow", "ALT_POW=2", "bfloat16", "positive", "tensor"),
    ("rsqrt f32", "rsqrt", "ALT_RSQRT", "float32", "positive", None),
    ("remainder alt f32", "remainder", "ALT_REMAINDER", "float32", "nonzero", "tensor"),
]
# FAST_MATH16 (ops/fast_math16.py, default off; group ``math16``): the ops whose 16-bit bodies it replaces, bf16
# 32768x8192 (the second operand of the binary ops the same), domains as bench_ops.py. sm_90 SASS per element,
# default -> FAST_MATH16: log 29.5 -> 17.1, log2 31.5 -> 17.1, log10 30.5 -> 18.1, log1p 33.6 -> 14.1, expm1
# 32.1 -> 14.1, tanh 24.9 -> 21.6, atanh 43.6 -> 20.1, acosh 74.8 -> 24.4, erf 32.4 -> 24.3, erfc 49.4 -> 29.4,
# logaddexp 50.4 -> 26.8, xlogy 36.0 -> 23.8, atan2 86.9 -> 42.8, asinh 30.1 (its fast body) -> 22.1; session 4's
# bench_ops (% of 4800 GB/s): erfc 49.8, atanh 58.9, acosh 60.6, atan2 62.3, expm1 64.4, log2 65.9, asinh 66.4, erf
# 66.5, log 67.8, log10 68.4, logaddexp 72.2, log1p 75.0, tanh 81.3, xlogy 81.5. gelu, elu, celu,
# selu (added later, first: timed with the key off and on explicitly, since sm90.json turns it on): 26.3 / 21.4 /
# 22.6 / 22.1 (their ``fast`` bodies) -> 21.4 / 16.4 / 17.6 / 17.1; H200 (session 5), key off / on: gelu 76.1 /
# 84.0 %, elu 85.2 / 89.8 %, celu 82.9 / 89.2 %, selu 83.9 / 89.4 %. sin, cos, tan by a Cody-Waite reduction with a
# block-uniform libdevice branch were slower (off / on: 74.3 / 69.3, 70.3 / 70.0, 80.4 / 66.6 %) and were dropped.
# atan, asin, acos (ops/fast_trig16.py, level 1): 23.6 (atan's ``fast`` body) / 23.3 / 23.1 (libdevice) -> 16.6 /
# 16.9 / 19.8. These seven run variants FAST_MATH16=0 and =1; the others =1 against the table's.
MATH16_EXPLICIT = ("gelu", "elu", "celu", "selu", "atan", "asin", "acos")
MATH16_CASES = [  # (op, input domain, binary)
    ("atan", "normal", False), ("asin", "unit", False), ("acos", "unit", False),
    ("gelu", "normal", False), ("elu", "normal", False), ("celu", "normal", False), ("selu", "normal", False),
    ("erfc", "normal", False), ("atanh", "unit", False), ("acosh", "ge1", False), ("expm1", "small", False),
    ("log2", "positive", False), ("erf", "normal", False), ("log", "positive", False), ("log10", "positive", False),
    ("logaddexp", "normal", True), ("log1p", "positive", False), ("tanh", "normal", False),
    ("xlogy", "positive", True), ("atan2", "normal", True), ("asinh", "normal", False),
    ("tanhshrink", "normal", False), ("sin", "normal", False), ("cos", "normal", False), ("tan", "normal", False),
]
# FAST_MATH16 level 2 (fast_math16.OPS2: ~2**-13 relative before rounding): op -> the level timed against it (0 where
# level 1 has no body), FAST_MATH16=2 after it. sm_90 SASS per element, level 1 -> 2: erf 24.25 -> 16.12, erfc
# 29.38 -> 17.38, gelu 21.38 -> 18.38, acosh 24.38 -> 15.12, asinh 22.12 -> 18.00, atanh 20.12 -> 15.00, atan2
# 42.75 -> 28.75; tanhshrink 25.88 (default) -> 16.12; sin, cos, tan (fast_trig16.OPS2; libdevice 84-86 static) ->
# 17.62, 18.12, 21.75 on the fast path (inline PTX's per-element slow path for |x| > 105615 not counted).
MATH16_LEVEL2 = {"erf": 1, "erfc": 1, "gelu": 1, "acosh": 1, "asinh": 1, "atanh": 1, "atan2": 1, "tanhshrink": 0,
                 "sin": 0, "cos": 0, "tan": 0}
# Alternative level-2 bodies behind their own keys, timed first (FAST_MATH16=2 with them): tan's ALT_TAN
# (ops/fast_trig16.py, session 7; sm_90 fast path 21.75 with the sin/cos body -> 17.62 for 1: r / Q(r**2) and a
# predicated rcp, two MUFU per element; 18.62 for 2: a degree-9 polynomial and the same rcp, one MUFU).
MATH16_ALT = {"tan": [{"FAST_MATH16": 2, "ALT_TAN": 1}, {"FAST_MATH16": 2, "ALT_TAN": 2}]}
GROUPS = ("issue4", "activations", "alt", "math16", "all")

ABLATIONS = {  # case name -> settings that change the code, not the schedule
    "relu": [{"HW_CVT": 0}], "add": [{"HW_CVT": 0}], "cast bf16->fp8": [{"HW_CVT": 0}],
    "hardtanh": [{"HW_CVT": 0}],
    "gelu": [{"FAST": 0}], "gelu tanh": [{"FAST": 0}], "silu": [{"FAST": 0}], "mish": [{"FAST": 0}],
    "logsigmoid": [{"FAST": 0}], "asinh": [{"FAST": 0}], "atan": [{"FAST": 0}], "sinh": [{"FAST": 0}],
}


class Case:
    """One benchmarked call: ``name``, the config ``rule`` its kernel reads, the op table name ``op``, input specs,
    ``call(tensors) -> result``, ``oracle(host inputs) -> float64 or exact host result`` for the table variant's
    check (``exact``: compare bits), the output dtype name and the bytes moved."""

    def __init__(self, name, rule, op, specs, call, oracle, out_dtype, exact=False, variants=None, geomean=True):
        self.name, self.rule, self.op, self.specs, self.call = name, rule, op, specs, call
        self.oracle, self.out_dtype, self.exact = oracle, out_dtype, exact
        self._variants, self.geomean = variants, geomean
        n = math.prod(specs[0].shape)
        self.bytes = sum(s.nbytes for s in specs) + n * H.DTYPE_NAMES[out_dtype]

    def variants(self) -> list[dict]:
        if self._variants is not None:  # the issue-4 cases: their own list (GRID, REMAINDER_VARIANTS)
            return self._variants
        v = VARIANTS[self.rule]
        return v[:2] + ABLATIONS.get(self.name, []) + v[2:]


def build_issue4_cases(nbx, smoke: bool) -> list[Case]:
    """remainder (bf16 32768x8192 and float32 16384x8192, a divisor of the benchmark's ``nonzero`` domain) over
    REMAINDER_VARIANTS, and abs, neg, exp, add, mul by a scalar and clamp with scalar bounds in both dtypes over
    GRID (the f32 rows are 512 MiB per tensor: >= 256 MiB, half the host set-up of 32768x8192)."""
    from nbxtensor.ops import registry
    cases = []
    for dt, shape in (("bfloat16", (32768, 8192)), ("float32", (16384, 8192))):
        if smoke:
            shape = (4, 48)
        tag = "bf16" if dt == "bfloat16" else "f32"
        x = H.InputSpec(shape, dt, "normal", seed=0)
        y = H.InputSpec(shape, dt, "normal", seed=1)
        d = H.InputSpec(shape, dt, "nonzero", seed=2)
        xs = H.InputSpec(shape, dt, "small", seed=3)

        def oracle(op, **kw):
            rec = registry.get(op)
            return lambda hs: rec.oracle(*[np.asarray(h, np.float64) for h in hs], **kw)

        def rem_oracle(hs):  # ATen's formula in float32 (fmod exact), as the kernels compute it
            from nbxtensor.ops.elementwise import _np_remainder
            return _np_remainder(np.asarray(hs[0], np.float32), np.asarray(hs[1], np.float32)).astype(np.float64)

        cases.append(Case(f"remainder {tag}", "pointwise", "remainder", [x, d], lambda t: nbx.remainder(t[0], t[1]),
                          rem_oracle, dt, variants=REMAINDER_VARIANTS, geomean=False))
        cases += [
            Case(f"abs {tag}", "pointwise", "abs", [x], lambda t: nbx.abs(t[0]), oracle("abs"), dt, variants=GRID),
            Case(f"neg {tag}", "pointwise", "neg", [x], lambda t: nbx.neg(t[0]), oracle("neg"), dt, variants=GRID),
            Case(f"exp {tag}", "pointwise", "exp", [xs], lambda t: nbx.exp(t[0]), oracle("exp"), dt, variants=GRID),
            Case(f"add {tag}", "pointwise", "add", [x, y], lambda t: nbx.add(t[0], t[1]), oracle("add"), dt,
                 variants=GRID),
            Case(f"mul scalar {tag}", "pointwise", "mul", [x], lambda t: nbx.mul(t[0], 1.5),
                 lambda hs: np.asarray(hs[0], np.float64) * 1.5, dt, variants=GRID),
            Case(f"clamp {tag}", "pointwise", "clamp", [x], lambda t: nbx.clamp(t[0], -1.0, 1.0),
                 lambda hs: np.clip(np.asarray(hs[0], np.float64), -1.0, 1.0), dt, variants=GRID),
        ]
    cases += _upcast_cases(nbx, smoke)  # issue 4's copy_ bf16/f16 -> float32 rows (ops/cast.py's CAST_VEC)
    return cases


# The copy rule's CAST_VEC (ops/cast.py's contiguous kernel, default off), most promising first. sm_90 SASS of
# copy_ bf16 -> float32 (BLOCK 4096, 8 warps): 85 instructions per thread with a shared-memory layout change and a
# barrier per tile (8 elements loaded per thread, 4 stored) -> 56 with CAST_VEC 4 (8-byte loads, 16-byte stores).
CAST_VARIANTS = [
    {"CAST_VEC": 4},
    {"CAST_VEC": 4, "BLOCK": 1024, "num_warps": 4},
    {"CAST_VEC": 4, "EVICT": 2},                      # + evict_first loads, streaming (.cs) stores
    {"CAST_VEC": 4, "BLOCK": 2048, "num_warps": 4},
    {"CAST_VEC": 4, "BLOCK": 8192, "num_warps": 8},
    {"BLOCK": 1024, "num_warps": 4},                  # the pointwise kernel's schedules
    {"EVICT": 2},
]


def _upcast_cases(nbx, smoke: bool) -> list[Case]:
    """copy_ of bfloat16 and float16 32768x8192 into float32 (bench_ops.py's cast rows) over CAST_VARIANTS: the
    table's output against the exact widening (nbxtensor.dtypes.casting, compared as float64: check_oracle's bit
    path is for 1- and 2-byte outputs), every variant against the table's bits."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.casting import cast_array
    shape = (4, 48) if smoke else (32768, 8192)
    out = []
    for src in ("bfloat16", "float16"):
        x = H.InputSpec(shape, src, "normal", seed=4)
        out.append(Case(f"cast {src}->f32", "copy", "copy_", [x], lambda t: _dst(nbx, t[0], nbx.float32).copy_(t[0]),
                        lambda hs, s=src: cast_array(np.asarray(hs[0]), getattr(T, s), T.float64), "float32",
                        variants=CAST_VARIANTS, geomean=False))
    return out


def build_alt_cases(nbx, smoke: bool) -> list[Case]:
    """:data:`ALT_CASES`: each op on bf16 32768x8192 (float32 16384x8192) with the table's body, then with its
    ``ALT_*`` key at the table's schedule and at BLOCK 2048 / 8 warps; every ALT variant is checked against the table
    variant's output by the dtype's tolerance (``ok (tol; n differ)``), the table's against the oracle."""
    from nbxtensor.ops import registry
    cases = []
    for name, op, key, dt, domain, second in ALT_CASES:
        shape = (4, 48) if smoke else ((32768, 8192) if dt == "bfloat16" else (16384, 8192))
        specs = [H.InputSpec(shape, dt, domain, seed=5)] + ([H.InputSpec(shape, dt, domain, seed=6)]
                                                            if second == "tensor" else [])
        rec, f = registry.get(op), getattr(nbx, op, None) or getattr(nbx.nn.functional, op)
        if second is None:
            call, orc = (lambda t, f=f: f(t[0])), (lambda hs, rec=rec: rec.oracle(np.asarray(hs[0], np.float64)))
        elif second == "tensor":
            call = lambda t, f=f: f(t[0], t[1])  # noqa: E731
            orc = lambda hs, rec=rec: rec.oracle(*[np.asarray(h, np.float64) for h in hs])  # noqa: E731
        else:
            call = lambda t, f=f, v=second: f(t[0], v)  # noqa: E731
            orc = lambda hs, rec=rec, v=second: rec.oracle(np.asarray(hs[0], np.float64), np.float64(v))  # noqa: E731
        key, _, val = key.partition("=")
        val = int(val or 1)
        cases.append(Case(name, "pointwise", op, specs, call, orc, dt,
                          variants=[{key: val}, {key: val, "BLOCK": 2048, "num_warps": 8}], geomean=False))
    return cases


def _math16_variants(op: str) -> list[dict]:
    """MATH16_ALT's variants (tan's ALT_TAN), then FAST_MATH16 0 and 1 for MATH16_EXPLICIT's ops, 1 for the others;
    then MATH16_LEVEL2's level and 2."""
    levels = [0, 1] if op in MATH16_EXPLICIT else [1]
    if op in MATH16_LEVEL2:
        levels = [v for v in levels if v < MATH16_LEVEL2[op]] + [MATH16_LEVEL2[op], 2]
    return MATH16_ALT.get(op, []) + [{"FAST_MATH16": v} for v in levels]


def build_math16_cases(nbx, smoke: bool) -> list[Case]:
    """:data:`MATH16_CASES` on bf16 32768x8192: the table's body, then ``FAST_MATH16=1`` at the table's schedule
    (checked against the table variant's output by the tolerance, ``ok (tol; n differ)``: the n are the one-ulp
    differences next to rounding boundaries)."""
    from nbxtensor.ops import registry
    cases = []
    shape = (4, 48) if smoke else (32768, 8192)
    for op, domain, binary in MATH16_CASES:
        specs = [H.InputSpec(shape, "bfloat16", domain, seed=7)] + (
            [H.InputSpec(shape, "bfloat16", domain, seed=8)] if binary else [])
        rec, f = registry.get(op), getattr(nbx, op, None) or getattr(nbx.nn.functional, op)
        cases.append(Case(f"{op} bf16", "pointwise", op, specs, lambda t, f=f: f(*t),
                          lambda hs, rec=rec: rec.oracle(*[np.asarray(h, np.float64) for h in hs]), "bfloat16",
                          variants=_math16_variants(op), geomean=False))
    return cases


def build_cases(nbx, smoke: bool, group: str = "activations") -> list[Case]:
    """The cases of ``group``: ``activations`` (the earlier sweep, below), ``issue4`` (:func:`build_issue4_cases`),
    ``alt`` (:func:`build_alt_cases`), ``math16`` (:func:`build_math16_cases`) or ``all``."""
    if group == "math16":
        return build_math16_cases(nbx, smoke)
    if group == "issue4":
        return build_issue4_cases(nbx, smoke)
    if group == "alt":
        return build_alt_cases(nbx, smoke)
    if group == "all":
        return build_issue4_cases(nbx, smoke) + build_alt_cases(nbx, smoke) + build_cases(nbx, smoke, "activations")
    return _activation_cases(nbx, smoke)


def _activation_cases(nbx, smoke: bool) -> list[Case]:
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes.casting import cast_array
    from nbxtensor.ops import registry
    F = nbx.nn.functional
    shape = (4, 48) if smoke else (32768, 8192)
    x = H.InputSpec(shape, "bfloat16", "normal", seed=0)
    y = H.InputSpec(shape, "bfloat16", "normal", seed=1)
    x8 = H.InputSpec(shape, "float8_e4m3fn", "normal", seed=9)

    def oracle(op, **kw):
        rec = registry.get(op)
        return lambda hs: rec.oracle(*[np.asarray(h, np.float64) for h in hs], **kw)

    def cast_rule(dst):
        return lambda hs: cast_array(hs[0], T.bfloat16, getattr(T, dst))

    cases = [
        Case("relu", "pointwise", "relu", [x], lambda t: F.relu(t[0]), oracle("relu"), "bfloat16"),
        Case("copy_", "copy", "copy_", [x], lambda t: _dst(nbx, t[0], nbx.bfloat16).copy_(t[0]), cast_rule("bfloat16"),
             "bfloat16", exact=True),
        Case("add", "pointwise", "add", [x, y], lambda t: nbx.add(t[0], t[1]), oracle("add"), "bfloat16"),
        Case("mul", "pointwise", "mul", [x, y], lambda t: nbx.mul(t[0], t[1]), oracle("mul"), "bfloat16"),
        Case("gelu", "pointwise", "gelu", [x], lambda t: F.gelu(t[0]), oracle("gelu"), "bfloat16"),
        Case("gelu tanh", "pointwise", "gelu", [x], lambda t: F.gelu(t[0], approximate="tanh"),
             oracle("gelu", approximate="tanh"), "bfloat16"),
        Case("silu", "pointwise", "silu", [x], lambda t: F.silu(t[0]), oracle("silu"), "bfloat16"),
        Case("mish", "pointwise", "mish", [x], lambda t: F.mish(t[0]), oracle("mish"), "bfloat16"),
        Case("hardtanh", "pointwise", "hardtanh", [x], lambda t: F.hardtanh(t[0]), oracle("hardtanh"), "bfloat16"),
        Case("logsigmoid", "pointwise", "logsigmoid", [x], lambda t: F.logsigmoid(t[0]), oracle("logsigmoid"),
             "bfloat16"),
        Case("exp", "pointwise", "exp", [x], lambda t: nbx.exp(t[0]), oracle("exp"), "bfloat16"),
        Case("cast bf16->fp8", "copy", "copy_", [x], lambda t: _dst(nbx, t[0], nbx.float8_e4m3fn).copy_(t[0]),
             cast_rule("float8_e4m3fn"), "float8_e4m3fn", exact=True),
        # session 7: bench_ops' fp8 -> bf16 row (the copy rule's bfloat16 tile) ran 84.6-85.4 % of 4.8 TB/s
        Case("cast fp8->bf16", "copy", "copy_", [x8], lambda t: _dst(nbx, t[0], nbx.bfloat16).copy_(t[0]),
             lambda hs: cast_array(hs[0], T.float8_e4m3fn, T.bfloat16), "bfloat16", exact=True),
        # unary ops whose libdevice bodies ran at ~0.6x PyTorch in bf16 (now fast bodies for 16-bit outputs)
        Case("asinh", "pointwise", "asinh", [x], lambda t: nbx.asinh(t[0]), oracle("asinh"), "bfloat16"),
        Case("atan", "pointwise", "atan", [x], lambda t: nbx.atan(t[0]), oracle("atan"), "bfloat16"),
        Case("sinh", "pointwise", "sinh", [x], lambda t: nbx.sinh(t[0]), oracle("sinh"), "bfloat16"),
    ]
    return cases


_DSTS: dict = {}


def _dst(nbx, like, dtype):
    """One destination per (shape, dtype, device), reused by every call (copy_ writes in place)."""
    key = (tuple(like.shape), dtype, str(like.device))
    if key not in _DSTS:
        _DSTS[key] = nbx.empty(*like.shape, dtype=dtype, device=like.device)
    return _DSTS[key]


def smoke_settings(settings: dict) -> dict:
    """A variant's settings for the interpreter (--smoke): BLOCK capped at 32 (six tiles of the 4x48 tensors; the
    interpreter's cost grows with the block) and one program per SM (4 there), so a persistent grid loops."""
    caps = {"BLOCK": 32, "programs_per_sm": 1}
    return {k: (min(v, caps[k]) if k in caps else v) for k, v in settings.items()}


def _bits_dtype(nbx, dt):
    return {1: nbx.int8, 2: nbx.int16, 4: nbx.int32, 8: nbx.int64}[dt.itemsize]


def check_bits(nbx, got, ref) -> tuple[bool, int]:
    """(bit-equal, number of differing elements), on the device."""
    bd = _bits_dtype(nbx, got.dtype)
    n = int((got.view(bd) != ref.view(bd)).sum().item())
    return n == 0, n


def check_tol(nbx, got, ref) -> tuple[bool, int]:
    """(within the dtype's tolerance everywhere, NaN equal to NaN; number of elements whose bits differ)."""
    from nbxtensor.dtypes import tolerance
    tol = tolerance(got.dtype)
    ok = bool(nbx.isclose(got.float(), ref.float(), rtol=tol.rtol, atol=tol.atol, equal_nan=True).all().item())
    return ok, check_bits(nbx, got, ref)[1]


def check_oracle(case: Case, res, host_inputs) -> str:
    """The table variant's first SAMPLE elements against the oracle (casts: the rule, bit for bit)."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes import tolerance
    from nbxtensor.dtypes.casting import cast_array
    n = min(SAMPLE, res.numel())
    got = np.asarray(res.reshape(-1)[:n].cpu().numpy())
    hs = [h.reshape(-1)[:n] for h in host_inputs]
    dt = getattr(T, case.out_dtype)
    if case.exact:
        exp = case.oracle(hs)
        nan = np.isnan(cast_array(got, dt, T.float64)) & np.isnan(cast_array(exp, dt, T.float64))
        bad = int((~nan & (got.view(np.uint8 if dt.itemsize == 1 else np.uint16)
                           != exp.view(np.uint8 if dt.itemsize == 1 else np.uint16))).sum())
        return "ok (oracle, bits)" if bad == 0 else f"MISMATCH: {bad} of {n} differ from the casting rule"
    with np.errstate(all="ignore"):
        e64 = np.asarray(case.oracle(hs), np.float64)
    exp = cast_array(cast_array(e64, T.float64, dt), dt, T.float64)
    a = cast_array(got, dt, T.float64)
    tol = tolerance(dt)
    with np.errstate(all="ignore"):
        close = np.where(np.isnan(exp) | np.isinf(exp), (a == exp) | (np.isnan(a) & np.isnan(exp)),
                         np.abs(a - exp) <= tol.atol + tol.rtol * np.abs(exp))
    bad = int((~close).sum())
    diff = int((a != exp).sum() - (np.isnan(a) & np.isnan(exp)).sum())
    return (f"ok (oracle; {diff} != rounded)" if bad == 0 else
            f"MISMATCH: {bad} of {n} beyond tolerance of the oracle")


def numerics(nbx, dev: str, smoke: bool, out_dir: str) -> list[str]:
    """The numerics pass (see the module docstring); returns printed lines."""
    from nbxtensor.dtypes import table as T
    from nbxtensor.dtypes import tolerance
    from nbxtensor.dtypes.casting import cast_array
    from nbxtensor.ops import registry
    from nbxtensor.runtime.configs import override
    F = nbx.nn.functional
    lines = []
    # float32 edge values and every bfloat16 midpoint (ties) and its neighbours
    bf = np.arange(0, 65536, 1 if not smoke else 509, dtype=np.uint32).astype(np.uint16).view(T.bfloat16.numpy)
    f = bf.astype(np.float32)
    f = f[np.isfinite(f)]
    nxt = np.nextafter(f, np.float32(np.inf))
    mid = ((f.astype(np.float64) + cast_array(cast_array(nxt, T.float32, T.bfloat16), T.bfloat16, T.float64)) / 2)
    mid = mid.astype(np.float32)
    edge = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 2.5, 448.0, 464.0, 480.0, 500.0, -500.0, 57344.0, 61439.0,
                     61440.0, 65504.0, 65519.0, 65520.0, 1e5, 3.4e38, -3.4e38, 1e-3, 1e-6, 1e-8, 3e-39, 1e-45,
                     -1e-45, 1.17549435e-38, 2.0 ** -9, 2.0 ** -10, 2.0 ** -17, np.inf, -np.inf, np.nan], np.float32)
    vals = np.concatenate([edge, f, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    x = nbx.from_numpy(vals).to(dev) if dev != "cpu" else nbx.from_numpy(vals)
    for dst in ("bfloat16", "float16", "float8_e4m3fn", "float8_e5m2"):
        dt = getattr(T, dst)
        exp = cast_array(vals, T.float32, dt)
        msg = []
        for hw in (1, 0):
            with override("copy", HW_CVT=hw):
                got = np.asarray(x.to(getattr(nbx, dst)).cpu().numpy())
            nan = np.isnan(cast_array(got, dt, T.float64)) & np.isnan(cast_array(exp, dt, T.float64))
            bits = np.uint8 if dt.itemsize == 1 else np.uint16
            bad = ~nan & (got.view(bits) != exp.view(bits))
            msg.append(f"HW_CVT={hw}: " + ("ok" if not bad.any() else
                                           f"MISMATCH {int(bad.sum())} (e.g. {vals[bad][:3]} -> {got[bad][:3]} "
                                           f"expected {exp[bad][:3]})"))
        lines.append(f"  float32 -> {dst:14s} {len(vals)} values: " + "; ".join(msg))
    for src in ("float8_e4m3fn", "float8_e5m2"):
        dt = getattr(T, src)
        allp = np.arange(256, dtype=np.uint8).view(dt.numpy)
        t = nbx.from_numpy(allp).to(dev) if dev != "cpu" else nbx.from_numpy(allp)
        exp = cast_array(allp, dt, T.float32)
        msg = []
        for hw in (1, 0):
            with override("copy", HW_CVT=hw):
                got = np.asarray(t.to(nbx.float32).cpu().numpy())
            bad = ~(np.isnan(got) & np.isnan(exp)) & (got.view(np.uint32) != exp.view(np.uint32))
            msg.append(f"HW_CVT={hw}: " + ("ok" if not bad.any() else f"MISMATCH {int(bad.sum())}"))
        lines.append(f"  {src} -> float32   256 patterns: " + "; ".join(msg))
    # the fast bodies over every finite bfloat16 (the table's setting: FAST on)
    xb = bf[np.isfinite(bf.astype(np.float32))]
    tb = nbx.from_numpy(xb).to(dev) if dev != "cpu" else nbx.from_numpy(xb)
    x64 = xb.astype(np.float64)
    tol = tolerance(T.bfloat16)
    for name, fn, op, kw in (("gelu", lambda t: F.gelu(t), "gelu", {}),
                             ("gelu tanh", lambda t: F.gelu(t, approximate="tanh"), "gelu", {"approximate": "tanh"}),
                             ("silu", F.silu, "silu", {}), ("mish", F.mish, "mish", {}),
                             ("logsigmoid", F.logsigmoid, "logsigmoid", {}), ("asinh", nbx.asinh, "asinh", {}),
                             ("atan", nbx.atan, "atan", {}), ("sinh", nbx.sinh, "sinh", {})):
        try:
            got = cast_array(np.asarray(fn(tb).cpu().numpy()), T.bfloat16, T.float64)
            with np.errstate(all="ignore"):
                e = np.asarray(registry.get(op).oracle(x64, **kw), np.float64)
            ok = np.isfinite(e)  # (logsigmoid's oracle, log(sigmoid), is -inf far out; the op is finite there)
            exp = cast_array(cast_array(e, T.float64, T.bfloat16), T.bfloat16, T.float64)
            with np.errstate(all="ignore"):  # (a float64 result past bfloat16's range rounds to inf: equal is fine)
                beyond = ok & ~((got == exp) | (np.abs(got - exp) <= tol.atol + tol.rtol * np.abs(exp)))
            differ = ok & (got != exp) & ~(np.isnan(got) & np.isnan(exp))
            lines.append(f"  fast {name:10s} {int(ok.sum())} finite bf16: {int(beyond.sum())} beyond tolerance, "
                         f"{int(differ.sum())} ({100 * differ.sum() / max(ok.sum(), 1):.3f} %) != correctly rounded"
                         + ("" if not beyond.any() else f"  MISMATCH e.g. x={x64[beyond][:3]} got {got[beyond][:3]} "
                            f"expected {exp[beyond][:3]}"))
        except Exception as ex:  # noqa: BLE001 - record, go on
            lines.append(f"  fast {name}: error {type(ex).__name__}: {str(ex).splitlines()[0][:120]}")
            SC.log_traceback(os.path.join(out_dir, "sweep_pointwise.log"), f"numerics {name}")
    return lines


def _fmt(s: dict) -> str:
    return json.dumps(s, separators=(",", ":"), sort_keys=True) if s else "table"


CSV_FIELDS = ["case", "op", "rule", "variant", "settings", "table_config", "status", "p20_ms", "p50_ms", "p80_ms",
              "gbps", "pct_of_4800", "bytes", "first_call_s", "gpu", "commit", "date"]


def main(argv=None) -> int:
    p = SC.sweep_parser(__doc__, "output folder (sweep_pointwise.csv is written there; default: a folder in the temp "
                        "dir)", out_default=os.path.join(tempfile.gettempdir(), "sweep_pointwise"), budget_s=120.0,
                        wording="variants")
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--no-numerics", action="store_true", help="skip the numerics pass")
    p.add_argument("--group", default="issue4", choices=GROUPS,
                   help="issue4 (default): remainder's schedules and the BLOCK x num_warps grid of simple ops (no "
                   "numerics pass); activations: the earlier cases with the cast and fast-body numerics; alt: the "
                   "ALT_* bodies (cosh, rsqrt, pow) against the table's (no numerics pass); math16: FAST_MATH16 "
                   "(ops/fast_math16.py) against the table's body on 21 ops (no numerics pass); all")
    a = p.parse_args(argv)
    t0 = time.monotonic()
    import nbxtensor as nbx
    import nbxtensor.nn.functional  # noqa: F401  (functional ops register on import)
    from nbxtensor.runtime.configs import launch_config
    dev = a.device
    st = SC.start("sweep_pointwise", nbx, dev, a.out, a.smoke)
    if st is None:
        return 2
    facts, timing, notes, clock, commit, date = st.facts, st.timing, st.notes, st.clock, st.commit, st.date
    print(f"sweep_pointwise on {facts['gpu']} (commit {commit}); budget {a.budget_s:.0f} s", flush=True)
    if not a.no_numerics and a.group not in ("issue4", "alt", "math16"):
        t_num = time.monotonic()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                lines = numerics(nbx, dev, a.smoke, a.out)
        except Exception as e:  # noqa: BLE001 - record, go on to the timings
            lines = [f"  error: {type(e).__name__}: {str(e).splitlines()[0][:160]}"]
            SC.log_traceback(os.path.join(a.out, "sweep_pointwise.log"), "numerics")
        print(f"numerics ({time.monotonic() - t_num:.0f} s):", *lines, sep="\n", flush=True)
    cases = build_cases(nbx, a.smoke, a.group)
    if a.cases:
        want = set(SC.names(a.cases))
        cases = [c for c in cases if c.name in want]
    inputs = SC.Inputs(nbx, dev, keep_host=True)

    state = {c.name: {"ref": None, "table": None} for c in cases}
    rows: list[dict] = []
    csv_path = os.path.join(a.out, "sweep_pointwise.csv")
    writer = SC.CsvRows(csv_path, CSV_FIELDS)
    plan = SC.rank_plan(cases, Case.variants)
    print(f"{len(plan)} variants over {len(cases)} cases", flush=True)
    est, skipped = (0.5 if a.smoke else 2.5), 0
    for rank, case, settings in plan:
        if a.budget_s and time.monotonic() - t0 + est > a.budget_s:
            skipped += 1
            continue
        st = state[case.name]
        row = {"case": case.name, "op": case.op, "rule": case.rule, "variant": "table" if not settings else f"v{rank}",
               "settings": _fmt(settings), "bytes": case.bytes, "gpu": facts["gpu"], "commit": commit, "date": date}
        t_var = time.monotonic()
        run_settings = smoke_settings(settings) if a.smoke else settings
        try:
            ts, hs = inputs.tensors(case.specs), inputs.hosts(case.specs)
            if st["table"] is None:
                st["table"] = launch_config(case.rule, ts[0].device, dtypes=(getattr(nbx, case.out_dtype),),
                                            numel=ts[0].numel())
            row["table_config"] = _fmt(st["table"])

            def check(res, st=st, settings=settings, case=case, hs=hs):
                if not settings:
                    st["ref"] = res.clone()
                    return check_oracle(case, res, hs)
                if st["ref"] is None:
                    return "unchecked (the table variant failed)"
                # (ALT_REMAINDER's body is bit for bit the table's: checked by bits)
                if "FAST" in settings or "FAST_MATH16" in settings or any(k.startswith("ALT_") and k != "ALT_REMAINDER"
                                                                          for k in settings):
                    ok, n = check_tol(nbx, res, st["ref"])
                    return f"ok (tol; {n} differ)" if ok else f"MISMATCH beyond tolerance ({n} differ)"
                ok, n = check_bits(nbx, res, st["ref"])
                return "ok (bits)" if ok else f"MISMATCH: {n} elements differ from the table's"
            times = SC.check_then_time(row, case.rule, run_settings, lambda ts=ts: case.call(ts), check, clock, timing,
                                       t_var)
            row.update(SC.bandwidth_fields(times, case.bytes))
        except Exception as e:  # noqa: BLE001 - record, go on with the next variant
            row["status"] = "error: " + SC.error_text(e, message_limit=160)
            SC.log_traceback(os.path.join(a.out, "sweep_pointwise.log"), f"{case.name} {_fmt(settings)}")
        est = max(est * 0.5 + (time.monotonic() - t_var) * 0.5, 0.3)
        rows.append(row)
        writer.write(row)
    writer.close()
    for c in cases:
        state[c.name]["ref"] = None
    report(rows, cases, state, skipped, time.monotonic() - t0, a.budget_s, csv_path, notes)
    return 0


def _ok(r: dict) -> bool:
    return str(r.get("status", "")).startswith("ok") and r.get("gbps") not in (None, "")


def report(rows, cases, state, skipped, wall, budget, csv_path, notes) -> None:
    """Per case: the table setting and up to 3 best variants (plus failures); then best per case; then per rule
    the setting with the best geometric mean over the rule's cases that ran it (ablations excluded)."""
    print()
    for c in cases:
        rs = [r for r in rows if r["case"] == c.name]
        if not rs:
            continue
        print(f"{c.name} [{c.rule} {_fmt(state[c.name]['table'] or {})}] {c.bytes / 2 ** 20:.0f} MiB moved")
        shown, more = SC.rows_to_show(rs, _ok, 3 if len(cases) <= 10 else 2, 2)
        for r in shown:
            if r.get("gbps") not in (None, ""):
                print(f"  {r['variant']:5s} {r['gbps']:7.1f} GB/s {r['pct_of_4800']:5.1f}% {r['p50_ms']:8.4f} ms  "
                      f"{r['status'][:30]:30s} {r['settings']}")
            else:
                print(f"  {r['variant']:5s} {'-':>7s}  {r['status'][:80]} {r['settings']}")
        if more:
            print(f"  ... {more} more in the CSV")
    print("\nbest per case (GB/s, % of 4800, x table):")
    for c in cases:
        found = SC.best_of_case(rows, c.name, _ok, TARGET_PCT)
        if not found:
            continue
        rs, best, tab, gain, flag = found
        print(f"  {c.name:16s} {best['gbps']:7.1f} {best['pct_of_4800']:5.1f}% {gain:>6s} {best['settings']}{flag}")
        for r in rs:  # the ablations: what the session's code changes are worth
            if ("ALT_" in r["settings"] or "FAST_MATH16" in r["settings"]) and tab and tab["gbps"] > 0:  # its gain
                print(f"  {'':16s} alt {r['settings']}: {r['gbps']:.1f} GB/s {r['pct_of_4800']:.1f}% "
                      f"({r['gbps'] / tab['gbps']:.3f}x the table)")
            elif any(k in r["settings"] for k in ("HW_CVT", "FAST")) and tab and r["gbps"] > 0:
                print(f"  {'':16s} ablation {r['settings']}: {r['gbps']:.1f} GB/s ({tab['gbps'] / r['gbps']:.2f}x "
                      "slower than the table)")
    print("\nper rule, best geometric mean over its cases (write into runtime/configs/sm90.json):")
    for rule in sorted({c.rule for c in cases}):
        names = [c.name for c in cases if c.rule == rule and c.geomean]
        if not names:
            continue
        gm = SC.geomean_by_setting(rows, rule, names, _ok,
                                   keep=lambda r: not any(k in r["settings"] for k in ("HW_CVT", "FAST", "ALT_")))
        if not gm:
            print(f"  {rule}: no setting ran on all of {names}")
            continue
        best = max(gm, key=gm.get)
        base = gm.get("table")
        print(f"  {rule:10s} {best}  geomean {gm[best]:.1f} GB/s" + (f" ({gm[best] / base:.3f}x table)" if base and
                                                                    base > 1e-6 else ""))
        for tag in ("bf16", "f32"):  # the issue-4 cases by dtype (a rule can name "dtypes")
            sub = [n for n in names if n.endswith(" " + tag)]
            gt = SC.geomean_by_setting(rows, rule, sub, _ok) if len(sub) > 1 else {}
            if gt:
                bt = max(gt, key=gt.get)
                print(f"  {rule:10s} {tag:4s} {bt}  geomean {gt[bt]:.1f} GB/s ({100 * gt[bt] / PEAK_GBPS:.1f} %)"
                      + (f", table {gt['table']:.1f}" if gt.get("table") else ""))
        if best != "table":
            table_cfg = SC.table_config(state, names)
            print(f"  {'':10s} -> large-tensor rule config {json.dumps(dict(table_cfg, **json.loads(best)))}")
    print(f"\nsweep_pointwise: {len(rows)} variants run, {skipped} skipped for the {budget:.0f} s budget, "
          f"{sum(1 for r in rows if str(r.get('status', '')).startswith('error'))} errors, "
          f"{sum(1 for r in rows if 'MISMATCH' in str(r.get('status', '')))} mismatches; {wall:.0f} s; "
          f"wrote {csv_path}" + (f"; notes: {'; '.join(notes)}" if notes else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main())
